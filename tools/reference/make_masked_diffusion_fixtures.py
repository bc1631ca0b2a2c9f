"""Reference numbers for dew's LLaDA and Dream (masked-diffusion language model) checkpoints.

transformers has no LLaDA or Dream class: the releases ship their own modeling code (GSAI-ML/LLaDA-8B-Base's
modeling_llada.py, Dream-org/Dream-v0-Base-7B's modeling_dream.py, loaded with trust_remote_code). What those
files compute is a Llama block (LLaDA: LLaDALlamaBlock, pre-norm RMSNorm, rotate-half rope, SwiGLU, no biases)
and a Qwen2 block (Dream: q/k/v biases, no o_proj bias), each with bidirectional attention (is_causal=False, no
causal mask). So the reference here is transformers' own LlamaForCausalLM / Qwen2ForCausalLM run with an
all-visible attention mask (a [B, 1, S, S] float mask of zeros, which transformers 5 uses as given), and the
script checks that the mask really is bidirectional: changing the last token must change the first position's
logits. These stand in for modeling_llada.py / modeling_dream.py, which need network access and a GPU-sized
download to run.

Writes under tests/fixtures/hf/llada/ and tests/fixtures/hf/dream/:
  config.json        in the release's own spelling: LLaDA's OLMo-style fields (d_model, n_layers, n_heads,
                     n_kv_heads, mlp_hidden_size, block_type "llama", rope true, ..., model_type "llada"); Dream's
                     Qwen2 fields with model_type "Dream", architectures ["DreamModel"]; both with mask_token_id
  model.safetensors  LLaDA: under LLaDA's tensor names (model.transformer.wte, blocks.N.q_proj, attn_out,
                     ff_proj, up_proj, ff_out, ln_f, ...), renamed from the Llama state dict; Dream: Qwen2's names
  io.safetensors     ids [2, S] (some positions hold the mask id) and logits [2, S, V]

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-bench/bin/python tools/reference/make_masked_diffusion_fixtures.py
(torch 2.11, transformers 5.24 from PyPI). Deterministic: fixed seeds, float32, CPU, eager attention.
"""
import json
import pathlib

import torch
import transformers as T
from safetensors.torch import save_file

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "hf"
VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, MLP, SEQ, MASK_ID = 128, 32, 2, 4, 2, 48, 12, 126
HEAD_DIM = HIDDEN // HEADS  # both releases derive it; neither reads a head_dim field


def llada_name(name):
    """A LlamaForCausalLM parameter name -> LLaDA's (modeling_llada.py's module tree)."""
    top = {"model.embed_tokens.weight": "model.transformer.wte.weight",
           "model.norm.weight": "model.transformer.ln_f.weight",
           "lm_head.weight": "model.transformer.ff_out.weight"}
    if name in top:
        return top[name]
    block = {"input_layernorm": "attn_norm", "self_attn.q_proj": "q_proj", "self_attn.k_proj": "k_proj",
             "self_attn.v_proj": "v_proj", "self_attn.o_proj": "attn_out", "post_attention_layernorm": "ff_norm",
             "mlp.gate_proj": "ff_proj", "mlp.up_proj": "up_proj", "mlp.down_proj": "ff_out"}
    parts = name.split(".")
    assert parts[:2] == ["model", "layers"], name
    layer, module, leaf = parts[2], ".".join(parts[3:-1]), parts[-1]
    return f"model.transformer.blocks.{layer}.{block[module]}.{leaf}"


def perturb(model, seed):
    """transformers initialises norms to the identity and biases to zero; make misplaced ones show."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:
                p.add_(0.1 * torch.randn(p.shape, generator=g))
            elif pname.endswith(".bias"):
                p.add_(0.2 * torch.randn(p.shape, generator=g))
    return model.float().eval()


def build_llada():
    torch.manual_seed(2001)
    config = T.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                           num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=MLP,
                           max_position_embeddings=64, rms_norm_eps=1e-5, hidden_act="silu", tie_word_embeddings=False,
                           attention_bias=False, mlp_bias=False, initializer_range=0.1,
                           rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    config._attn_implementation = "eager"
    model = perturb(T.LlamaForCausalLM(config), 11)
    # LLaDA-8B-Base's config.json, every field it writes, at this size.
    hf = {
        "activation_type": "silu", "alibi": False, "alibi_bias_max": 8.0, "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0, "attention_layer_norm": False, "attention_layer_norm_with_affine": True,
        "bias_for_layer_norm": False, "block_group_size": 1, "block_type": "llama", "d_model": HIDDEN,
        "embedding_dropout": 0.0, "embedding_size": VOCAB, "eos_token_id": 2, "flash_attention": False,
        "include_bias": False, "include_qkv_bias": False, "init_cutoff_factor": None, "init_device": "meta",
        "init_fn": "mitchell", "init_std": 0.02, "input_emb_norm": False, "layer_norm_type": "rms",
        "layer_norm_with_affine": True, "mask_token_id": MASK_ID, "max_sequence_length": 64,
        "mlp_hidden_size": MLP, "mlp_ratio": 4, "model_type": "llada", "multi_query_attention": None,
        "n_heads": HEADS, "n_kv_heads": KV_HEADS, "n_layers": LAYERS, "pad_token_id": 2, "precision": "amp_bf16",
        "residual_dropout": 0.0, "rms_norm_eps": 1e-5, "rope": True, "rope_full_precision": True,
        "rope_theta": 500000.0, "scale_logits": False, "torch_dtype": "float32", "use_cache": False,
        "vocab_size": VOCAB, "weight_tying": False,
    }
    weights = {llada_name(k): v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    return model, hf, weights


def build_dream():
    torch.manual_seed(2002)
    config = T.Qwen2Config(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                           num_key_value_heads=KV_HEADS, intermediate_size=MLP, max_position_embeddings=64,
                           rms_norm_eps=1e-6, hidden_act="silu", tie_word_embeddings=False, use_sliding_window=False,
                           initializer_range=0.1, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    config._attn_implementation = "eager"
    model = perturb(T.Qwen2ForCausalLM(config), 12)
    # Dream-v0-Base-7B's config.json fields at this size (auto_map left out: no modeling_dream.py here).
    hf = {
        "architectures": ["DreamModel"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": HIDDEN, "initializer_range": 0.02, "intermediate_size": MLP,
        "mask_token_id": MASK_ID, "max_position_embeddings": 64, "max_window_layers": LAYERS, "model_type": "Dream",
        "num_attention_heads": HEADS, "num_hidden_layers": LAYERS, "num_key_value_heads": KV_HEADS,
        "pad_token_id": 0, "rms_norm_eps": 1e-6, "rope_scaling": None, "rope_theta": 1000000.0,
        "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "float32", "use_cache": True,
        "use_sliding_window": False, "vocab_size": VOCAB,
    }
    weights = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    return model, hf, weights


def bidirectional_logits(model, ids):
    mask = torch.zeros(ids.shape[0], 1, ids.shape[1], ids.shape[1])  # every position sees every position
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def main():
    for name, build in (("llada", build_llada), ("dream", build_dream)):
        model, hf, weights = build()
        out = OUT / name
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(hf, indent=2) + "\n")
        save_file(weights, out / "model.safetensors", metadata={"format": "pt"})

        g = torch.Generator().manual_seed(99)
        ids = torch.randint(3, VOCAB - 2, (2, SEQ), generator=g)
        ids[0, [2, 5, 9]] = MASK_ID  # a few masked positions, as a denoising step sees them
        ids[1, SEQ // 2:] = MASK_ID  # a prompt followed by a fully masked answer
        logits = bidirectional_logits(model, ids)

        # The mask must really be all-visible: the last token reaches the first position. And the 4D mask is used
        # as an additive mask: the same path with -inf above the diagonal gives transformers' own causal logits.
        changed = ids.clone()
        changed[:, -1] = 5
        reach = float((bidirectional_logits(model, changed)[:, 0] - logits[:, 0]).abs().max())
        assert reach > 1e-3, "not bidirectional"
        upper = torch.full((SEQ, SEQ), float("-inf")).triu(1).expand(ids.shape[0], 1, SEQ, SEQ)
        with torch.no_grad():
            causal = model(input_ids=ids).logits
            causal_by_mask = model(input_ids=ids, attention_mask=upper).logits
        assert torch.allclose(causal, causal_by_mask, atol=1e-6), "the 4D mask is not applied additively"
        assert (causal[:, 0] - logits[:, 0]).abs().max() > 1e-3, "causal and bidirectional agree"

        save_file({"ids": ids.contiguous(), "logits": logits.contiguous()}, out / "io.safetensors")
        print(name, "logit range", float(logits.abs().max()), "mask id", MASK_ID,
              "first position moved by the last token", reach)


if __name__ == "__main__":
    main()
