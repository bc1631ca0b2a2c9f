"""Reference numbers for dew's Hugging Face decoder families, from transformers' own model classes.

For each family (llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text) builds a tiny random float32
model with the family's distinctive features switched on, and writes under tests/fixtures/hf/FAMILY/:
  config.json, model.safetensors   as transformers' save_pretrained writes them (what load_hf_model reads)
  io.safetensors
    ids [2, S]                      an unpadded batch;      logits [2, S, V]
    padded_ids / padded_mask /      a left-padded batch (row 1 has PAD pads), positions counted from each
    padded_positions [2, S]         row's first real token; padded_logits [2, S, V] (compare where mask = 1)
    prompt0 [P0], prompt1 [P1]      two prompts; greedy0 / greedy1 [NEW]: model.generate(do_sample=False)
                                    of each prompt alone, new tokens only

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-bench/bin/python tools/reference/make_hf_family_fixtures.py
(torch 2.11, transformers 5.24 from PyPI). Deterministic: fixed seeds, float32, CPU, eager attention.
"""
import json
import pathlib

import torch
import transformers as T
from safetensors.torch import save_file

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "hf"
VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, MLP, SEQ, PAD, NEW = 128, 32, 4, 4, 2, 48, 12, 4, 8
COMMON = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
              num_key_value_heads=KV_HEADS, intermediate_size=MLP, max_position_embeddings=64, rms_norm_eps=1e-6,
              bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.1)

# Each family with what distinguishes it switched on.
FAMILIES = {
    # Llama 3.1 rotary scaling (a small original context so every band is exercised), biases everywhere.
    "llama": (T.LlamaConfig, T.LlamaForCausalLM, dict(
        head_dim=8, tie_word_embeddings=False, attention_bias=True, mlp_bias=True, hidden_act="silu",
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 16})),
    # A sliding window shorter than the sequence, on every layer.
    "mistral": (T.MistralConfig, T.MistralForCausalLM, dict(
        head_dim=8, tie_word_embeddings=False, sliding_window=4, hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0})),
    # q/k/v biases (no o_proj bias); sliding window on the layers from max_window_layers on.
    "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, dict(
        tie_word_embeddings=True, use_sliding_window=True, sliding_window=5, max_window_layers=2,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    # q/k norms, linear rotary scaling.
    "qwen3": (T.Qwen3Config, T.Qwen3ForCausalLM, dict(
        head_dim=16, tie_word_embeddings=True, attention_bias=False,
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0})),
    # (1 + weight) norms, sqrt(hidden) embedding scale, gelu_pytorch_tanh, head_dim != hidden / heads.
    "gemma": (T.GemmaConfig, T.GemmaForCausalLM, dict(
        head_dim=16, tie_word_embeddings=True, hidden_act="gelu_pytorch_tanh")),
    # Sandwich norms, attention and final soft-caps, query_pre_attn_scalar, alternating sliding layers.
    "gemma2": (T.Gemma2Config, T.Gemma2ForCausalLM, dict(
        head_dim=8, tie_word_embeddings=True, attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
        query_pre_attn_scalar=24, sliding_window=4, hidden_activation="gelu_pytorch_tanh")),
    # q/k norms, local rotary base on sliding layers, linear scaling on global ones, a layer_types pattern.
    "gemma3_text": (T.Gemma3TextConfig, T.Gemma3ForCausalLM, dict(
        head_dim=8, tie_word_embeddings=True, query_pre_attn_scalar=16, sliding_window=4,
        final_logit_softcapping=4.0,
        layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}})),
}


def build(name):
    config_cls, model_cls, extra = FAMILIES[name]
    torch.manual_seed(1234 + list(FAMILIES).index(name))
    config = config_cls(**COMMON, **extra)
    config._attn_implementation = "eager"
    model = model_cls(config)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname:  # transformers initialises norms to the identity; make misplaced ones show
                p.add_(0.1 * torch.randn_like(p))
            elif pname.endswith(".bias"):
                p.add_(0.2 * torch.randn_like(p))
    return model.float().eval()


def main():
    for name in FAMILIES:
        out = OUT / name
        out.mkdir(parents=True, exist_ok=True)
        model = build(name)
        model.save_pretrained(out, safe_serialization=True)
        for extra in ("generation_config.json",):
            (out / extra).unlink(missing_ok=True)

        g = torch.Generator().manual_seed(99)
        ids = torch.randint(3, VOCAB, (2, SEQ), generator=g)
        mask = torch.ones(2, SEQ, dtype=torch.long)
        mask[1, :PAD] = 0
        padded = ids.clone()
        padded[1, :PAD] = 0
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        prompts = [ids[0, :5], ids[1, :3]]
        with torch.no_grad():
            logits = model(input_ids=ids).logits
            padded_logits = model(input_ids=padded, attention_mask=mask, position_ids=positions).logits
            greedy = []
            for p in prompts:
                gen = model.generate(p.unsqueeze(0), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                     max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, eos_token_id=None,
                                     pad_token_id=0)
                greedy.append(gen[0, len(p):].clone())
        tensors = {"ids": ids, "logits": logits, "padded_ids": padded, "padded_mask": mask,
                   "padded_positions": positions, "padded_logits": padded_logits,
                   "prompt0": prompts[0].clone(), "prompt1": prompts[1].clone(),
                   "greedy0": greedy[0], "greedy1": greedy[1]}
        save_file({k: v.contiguous() for k, v in tensors.items()}, out / "io.safetensors")
        print(name, "logit range", float(logits.abs().max()), "greedy", greedy[0].tolist(), greedy[1].tolist())


if __name__ == "__main__":
    main()
