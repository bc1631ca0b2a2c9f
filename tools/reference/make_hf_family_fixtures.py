"""Reference numbers for dew's Hugging Face decoder families, from transformers' own model classes.

For each family (llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, and the wider ones gpt2, gpt_neox,
phi3, phi3_longrope (Phi-3 with longrope rotary scaling), olmo2, granite) builds a tiny random float32 model with the family's distinctive features switched on,
and writes under tests/fixtures/hf/FAMILY/:
  config.json, model.safetensors   as transformers' save_pretrained writes them (what load_hf_model reads)
  io.safetensors
    ids [2, S]                      an unpadded batch;      logits [2, S, V]
    padded_ids / padded_mask /      a left-padded batch (row 1 has PAD pads), positions counted from each
    padded_positions [2, S]         row's first real token; padded_logits [2, S, V] (compare where mask = 1)
    prompt0 [P0], prompt1 [P1]      two prompts; greedy0 / greedy1 [NEW]: model.generate(do_sample=False)
                                    of each prompt alone, new tokens only
  and, for the wider families (2 layers) and the mixtures of experts (mixtral, qwen2_moe, qwen3_moe), a peft LoRA (r=4, alpha=8, random non-zero A and B) on the
  projections the family stores unfused, under dew's names (model.layers.N.self_attn.o_proj, ...):
    lora.NAME.lora_A.weight / lora.NAME.lora_B.weight   the adapter's values
    lora_logits [2, S, V]           the adapted model's logits on ids
    lora_loss []                    mean next-token cross-entropy of those logits on ids
  and for the mixtures of experts padded_aux_loss [], transformers' router load-balancing loss on the
  left-padded batch (its padding masked out).
    grad.NAME.lora_A.weight / ...   that loss's gradient with respect to each adapter matrix
  and, for the families that fuse projections (gpt2, gpt_neox, phi3), a second peft LoRA targeting modules by
  the family's own names, fused ones included (FAMILY_TARGETS: one adapter on c_attn, query_key_value, qkv_proj,
  gate_up_proj, as peft makes it), under the family's module paths (transformer.h.0.attn.c_attn, ...):
    family_lora.PATH.lora_A.weight / ...   its values;   family_grad.PATH.lora_A.weight / ...   their gradients
    family_lora_logits [2, S, V], family_lora_loss []
  and that adapter as peft's save_pretrained writes it, in peft_adapter/ (target_modules sorted).
  For the mixtures of experts the LoRA also targets the grouped expert tensors (peft's target_parameters on
  mlp.experts.gate_up_proj / down_proj), stored as dew groups them: lora_A [experts, r, in] from peft's
  [r * experts, in], lora_B [experts, out, r] from peft's [out, r * experts] (column r_i * experts + e), under
  model.layers.N.mlp.experts.lora_{gate_up,down}_proj.lora_{A,B}.weight.

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-bench/bin/python tools/reference/make_hf_family_fixtures.py [FAMILY ...]
(torch 2.11, transformers 5.24, peft 0.21 from PyPI; no FAMILY = all of them). Deterministic: fixed seeds, float32, CPU, eager attention.
"""
import copy
import json
import pathlib
import sys

import peft

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

# The wider families: full keyword sets (GPT-2 spells its sizes its own way), 2 layers, and the modules a
# peft LoRA targets (the unfused ones) with dew's name for each: {peft module suffix: dew module suffix}.
IDS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.1)
LLAMA_LORA = {f"self_attn.{p}": f"self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")} | {
    f"mlp.{p}": f"mlp.{p}" for p in ("gate_proj", "up_proj", "down_proj")}
WIDER = {
    # Conv1D c_attn (fused, transposed), learned positions, LayerNorm with bias, gelu_new; the published
    # dropouts (0.1, inert for dew), tied head.
    "gpt2": (T.GPT2Config, T.GPT2LMHeadModel, dict(
        vocab_size=VOCAB, n_positions=64, n_embd=HIDDEN, n_layer=2, n_head=HEADS, n_inner=MLP,
        activation_function="gelu_new", layer_norm_epsilon=1e-5, **IDS),
        "transformer.h", {"attn.c_proj": "self_attn.o_proj", "mlp.c_fc": "mlp.up_proj", "mlp.c_proj": "mlp.down_proj"}),
    # Parallel residual, partial rotary (half of each head), per-head interleaved query_key_value, exact gelu,
    # untied embed_out.
    "gpt_neox": (T.GPTNeoXConfig, T.GPTNeoXForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS, intermediate_size=MLP,
        hidden_act="gelu", max_position_embeddings=64, layer_norm_eps=1e-5, use_parallel_residual=True,
        tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        **IDS),
        "gpt_neox.layers", {"attention.dense": "self_attn.o_proj", "mlp.dense_h_to_4h": "mlp.up_proj",
                            "mlp.dense_4h_to_h": "mlp.down_proj"}),
    # Fused qkv_proj and gate_up_proj, partial rotary, a sliding window on every layer, grouped-query heads.
    "phi3": (T.Phi3Config, T.Phi3ForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        intermediate_size=MLP, max_position_embeddings=64, original_max_position_embeddings=64, rms_norm_eps=1e-5,
        sliding_window=5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}, **IDS),
        "model.layers", {"self_attn.o_proj": "self_attn.o_proj", "mlp.down_proj": "mlp.down_proj"}),
    # Phi-3's longrope: short_factor up to original_max_position_embeddings (8) tokens, long_factor beyond,
    # cos/sin scaled by sqrt(1 + ln 8 / ln 8); the 12-token batch and both greedy runs cross the boundary.
    "phi3_longrope": (T.Phi3Config, T.Phi3ForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        intermediate_size=MLP, max_position_embeddings=64, original_max_position_embeddings=8, rms_norm_eps=1e-5,
        sliding_window=5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                         "short_factor": [1.0, 1.5], "long_factor": [2.0, 7.5]}, **IDS),
        "model.layers", {"self_attn.o_proj": "self_attn.o_proj", "mlp.down_proj": "mlp.down_proj"}),
    # Norms after each sublayer only, q/k RMSNorm over the whole projection.
    "olmo2": (T.Olmo2Config, T.Olmo2ForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        intermediate_size=MLP, max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **IDS),
        "model.layers", LLAMA_LORA),
    # Embedding, residual, attention and logits multipliers; biases on attention and MLP.
    "granite": (T.GraniteConfig, T.GraniteForCausalLM, dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        intermediate_size=MLP, max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=True,
        attention_bias=True, mlp_bias=True, embedding_multiplier=3.0, residual_multiplier=0.5,
        attention_multiplier=0.2, logits_scaling=2.5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        **IDS),
        "model.layers", LLAMA_LORA),
}

# Targets in each fusing family's own names: the fused modules (one peft adapter each) and an unfused one
# (GPT-2's c_proj names both attn.c_proj and mlp.c_proj).
FAMILY_TARGETS = {"gpt2": ["c_attn", "c_proj"], "gpt_neox": ["query_key_value", "dense_4h_to_h"],
                  "phi3": ["qkv_proj", "gate_up_proj"]}


# Mixtures of experts: 4 experts, top-2, small widths, float32.
MOE_IDS = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
               max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=False, **IDS)
MOE = {
    # Every layer MoE, top-2 renormalised, a sliding window on every layer, Mixtral's on-disk w1/w2/w3 names.
    "mixtral": (T.MixtralConfig, T.MixtralForCausalLM, dict(
        num_hidden_layers=2, intermediate_size=24, num_local_experts=4, num_experts_per_tok=2, sliding_window=5,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, **MOE_IDS), ["q_proj", "v_proj"]),
    # A sigmoid-gated shared expert, norm_topk_prob false, q/k/v biases, a dense layer (mlp_only_layers);
    # layer 0's router is zero, so every token's probabilities tie (the tie order must be transformers').
    "qwen2_moe": (T.Qwen2MoeConfig, T.Qwen2MoeForCausalLM, dict(
        num_hidden_layers=3, intermediate_size=MLP, moe_intermediate_size=16, shared_expert_intermediate_size=20,
        num_experts=4, num_experts_per_tok=2, norm_topk_prob=False, mlp_only_layers=[1], qkv_bias=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **MOE_IDS), ["q_proj", "v_proj", "up_proj"]),
    # q/k norms, norm_topk_prob true, experts every second layer (decoder_sparse_step 2).
    "qwen3_moe": (T.Qwen3MoeConfig, T.Qwen3MoeForCausalLM, dict(
        num_hidden_layers=4, head_dim=16, intermediate_size=MLP, moe_intermediate_size=16, num_experts=4,
        num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=2,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **MOE_IDS), ["q_proj", "v_proj"]),
}
EXPERT_TENSORS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]


def build(name):
    if name in MOE:
        config_cls, model_cls, kwargs = MOE[name][:3]
        torch.manual_seed(4321 + list(MOE).index(name))
        config = config_cls(**kwargs)
    elif name in WIDER:
        config_cls, model_cls, kwargs = WIDER[name][:3]
        torch.manual_seed(1234 + len(FAMILIES) + list(WIDER).index(name))
        config = config_cls(**kwargs)
    else:
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
            elif name in MOE and pname.endswith("mlp.gate.weight"):
                # Routers far from uniform, so the top-2 choice is clear-cut (no near ties a rounding could flip),
                # except qwen2_moe's first, zero: exact ties everywhere.
                p.copy_(torch.zeros_like(p) if name == "qwen2_moe" and ".layers.0." in pname else torch.randn_like(p))
            elif name in MOE and "experts" in pname:
                p.copy_(0.1 * torch.randn_like(p))
    return model.float().eval()


def adapted_with(model, name, targets, seed):
    """peft's LoRA (r=4, alpha=8) on a copy of the model with random A and B: the adapted model, its logits and
    loss on ids, after the loss's backward."""
    lora = peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets,
                           fan_in_fan_out=name == "gpt2", task_type="CAUSAL_LM")
    adapted = peft.get_peft_model(copy.deepcopy(model), lora).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in adapted.named_parameters():
            if "lora_A" in pname or "lora_B" in pname:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    return adapted


def loss_of(adapted, ids):
    logits = adapted(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
    loss.backward()
    return logits, loss


def lora_reference(model, name, ids):
    """A peft LoRA with random A and B on the family's unfused projections: its values, logits, loss and
    gradients, keyed by dew's parameter names."""
    prefix, modules = WIDER[name][3], WIDER[name][4]
    adapted = adapted_with(model, name, sorted({m.split(".")[-1] for m in modules}), 5)
    logits, loss = loss_of(adapted, ids)
    out = {"lora_logits": logits.detach().clone(), "lora_loss": loss.detach().clone()}
    for pname, p in adapted.named_parameters():
        if "lora_A" not in pname and "lora_B" not in pname:
            continue
        # base_model.model.PREFIX.N.MODULE.lora_X.default.weight -> model.layers.N.DEW_MODULE.lora_X.weight
        path = pname.split(prefix + ".", 1)[1]
        layer, rest = path.split(".", 1)
        module, leaf = rest.split(".lora_")
        dew = f"model.layers.{layer}.{modules[module]}.lora_{leaf.replace('.default', '')}"
        out["lora." + dew] = p.detach().clone()
        out["grad." + dew] = p.grad.detach().clone()
    return out


def family_lora_reference(model, name, ids, adapter_dir):
    """A peft LoRA on FAMILY_TARGETS[name] (fused modules among them): values, logits, loss and gradients keyed
    by the family's module paths; the adapter directory peft writes, in adapter_dir."""
    adapted = adapted_with(model, name, FAMILY_TARGETS[name], 6)
    logits, loss = loss_of(adapted, ids)
    out = {"family_lora_logits": logits.detach().clone(), "family_lora_loss": loss.detach().clone()}
    for pname, p in adapted.named_parameters():
        if "lora_A" in pname or "lora_B" in pname:
            # base_model.model.PATH.lora_X.default.weight -> PATH.lora_X.weight
            path = pname.removeprefix("base_model.model.").replace(".default", "")
            out["family_lora." + path] = p.detach().clone()
            out["family_grad." + path] = p.grad.detach().clone()
    adapted.save_pretrained(adapter_dir)
    (adapter_dir / "README.md").unlink(missing_ok=True)
    # peft writes target_modules from a set, in hash order; sorted, the file is the same on every run.
    config_path = adapter_dir / "adapter_config.json"
    adapter_config = json.loads(config_path.read_text())
    adapter_config["target_modules"] = sorted(adapter_config["target_modules"])
    config_path.write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n")
    return out


def moe_lora_reference(model, name, ids):
    """peft LoRA on the attention (and Qwen2-MoE's shared expert / dense up_proj) modules and on the grouped
    expert tensors: values, logits, loss and gradients under dew's names, the expert ones grouped."""
    r = 4
    lora = peft.LoraConfig(r=r, lora_alpha=8, lora_dropout=0.0, target_modules=MOE[name][3],
                           target_parameters=EXPERT_TENSORS, task_type="CAUSAL_LM")
    adapted = peft.get_peft_model(model, lora).eval()
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for pname, p in adapted.named_parameters():
            if "lora_A" in pname or "lora_B" in pname:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
    logits = adapted(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
    loss.backward()
    out = {"lora_logits": logits.detach().clone(), "lora_loss": loss.detach().clone()}
    experts = model.config.num_experts if hasattr(model.config, "num_experts") else model.config.num_local_experts
    for pname, p in adapted.named_parameters():
        if "lora_A" not in pname and "lora_B" not in pname:
            continue
        path = pname.split("base_model.model.", 1)[1].replace(".default", "")
        value, grad = p.detach().clone(), p.grad.detach().clone()
        if ".experts." in path:
            # peft nests one ParamWrapper per targeted tensor: the outer one (experts.lora_X) wraps the last
            # target (down_proj), the inner (experts.base_layer.lora_X) the first (gate_up_proj).
            tensor = "gate_up_proj" if ".base_layer." in path else "down_proj"
            module = path.split(".experts.")[0] + ".experts.lora_" + tensor
            leaf = "lora_A" if ".lora_A." in path else "lora_B"
            if leaf == "lora_A":  # [r * experts, in] -> [experts, r, in]
                group = lambda t: t.reshape(experts, r, t.shape[-1])
            else:  # [out, r * experts] -> [experts, out, r]
                group = lambda t: t.reshape(t.shape[0], r, experts).permute(2, 0, 1)
            path = f"{module}.{leaf}.weight"
            value, grad = group(value), group(grad)
        out["lora." + path] = value.contiguous()
        out["grad." + path] = grad.contiguous()
    return out


def main():
    chosen = sys.argv[1:] or [*FAMILIES, *WIDER, *MOE]
    for name in chosen:
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
        if "longrope" in name:
            # A batch no longer than original_max_position_embeddings (short_factor), and each padded row
            # alone: transformers picks the factors by the batch's longest row, dew by each row's own length.
            with torch.no_grad():
                tensors["short_ids"] = ids[:, :6].clone()
                tensors["short_logits"] = model(input_ids=tensors["short_ids"]).logits
                tensors["padded_logits"] = torch.cat([model(input_ids=padded[i:i + 1], attention_mask=mask[i:i + 1],
                                                            position_ids=positions[i:i + 1]).logits for i in range(2)])
        if name in MOE:
            with torch.no_grad():  # transformers' load_balancing_loss_func over the padded batch's real tokens
                routed = model(input_ids=padded, attention_mask=mask, position_ids=positions, output_router_logits=True)
            tensors["padded_aux_loss"] = routed.aux_loss.detach().clone().float()
        if name in WIDER:
            tensors |= lora_reference(model, name, ids)
        elif name in MOE:
            tensors |= moe_lora_reference(model, name, ids)
        if name in FAMILY_TARGETS:
            tensors |= family_lora_reference(model, name, ids, out / "peft_adapter")
        save_file({k: v.contiguous() for k, v in tensors.items()}, out / "io.safetensors")
        print(name, "logit range", float(logits.abs().max()), "greedy", greedy[0].tolist(), greedy[1].tolist())


if __name__ == "__main__":
    main()
