"""Reference numbers for dew's LoRA adapters, from PyPI peft on a tiny transformers Llama.

Writes under tests/fixtures/lora/:
  base/config.json, base/model.safetensors    a tiny random float32 Llama (grouped-query attention, untied
                                              head), as save_pretrained writes it (what load_hf_model reads)
  adapter/adapter_config.json,                a peft LoRA (r=4, lora_alpha=8, all seven projections) whose A
  adapter/adapter_model.safetensors           and B are both random and non-zero (peft initialises B to zero,
                                              which would hide a misplaced or transposed B), as peft's
                                              save_pretrained writes it (target_modules then sorted: peft
                                              writes them in a set's hash order)
  logits.json                                 {"ids": [B][S], "base": [B][S][V] the base model's logits,
                                              "adapted": the peft model's, "merged": merge_and_unload()'s}

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-bench/bin/python tools/reference/make_lora_fixtures.py
(committed from torch 2.11, transformers 5.25, peft 0.21; the pinned transformers 5.24.0 writes the same bytes but for
base/config.json's transformers_version). Deterministic: fixed seeds, float32, CPU, eager attention.
"""
import json
import pathlib
import shutil

import peft
import torch
import transformers as T

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "lora"
VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, MLP, BATCH, SEQ = 64, 32, 2, 4, 2, 48, 2, 8
RANK, ALPHA = 4, 8
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main():
    torch.manual_seed(2024)
    config = T.LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                           num_key_value_heads=KV_HEADS, intermediate_size=MLP, max_position_embeddings=32,
                           rms_norm_eps=1e-6, tie_word_embeddings=False, initializer_range=0.1,
                           bos_token_id=1, eos_token_id=2, pad_token_id=0)
    config._attn_implementation = "eager"
    base = T.LlamaForCausalLM(config).float().eval()
    with torch.no_grad():  # transformers initialises norms to the identity; make misplaced ones show
        for name, p in base.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))

    for sub in ("base", "adapter"):
        shutil.rmtree(OUT / sub, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    base.save_pretrained(OUT / "base", safe_serialization=True)
    (OUT / "base" / "generation_config.json").unlink(missing_ok=True)

    ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        base_logits = base(input_ids=ids).logits

    lora = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0, target_modules=TARGETS, task_type="CAUSAL_LM")
    model = peft.get_peft_model(base, lora).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_A" in name or "lora_B" in name:
                p.copy_(0.2 * torch.randn_like(p))
        adapted_logits = model(input_ids=ids).logits
    model.save_pretrained(OUT / "adapter")
    (OUT / "adapter" / "README.md").unlink(missing_ok=True)
    # peft writes target_modules from a set, in hash order; sorted, the file is the same on every run.
    config_path = OUT / "adapter" / "adapter_config.json"
    adapter_config = json.loads(config_path.read_text())
    adapter_config["target_modules"] = sorted(adapter_config["target_modules"])
    config_path.write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n")
    with torch.no_grad():
        merged_logits = model.merge_and_unload()(input_ids=ids).logits

    def rounded(t):
        return [[[float(v) for v in row] for row in seq] for seq in t.tolist()]

    out = {"ids": ids.tolist(), "base": rounded(base_logits), "adapted": rounded(adapted_logits),
           "merged": rounded(merged_logits)}
    (OUT / "logits.json").write_text(json.dumps(out) + "\n")
    print("max |adapted - base|", float((adapted_logits - base_logits).abs().max()),
          "max |merged - adapted|", float((merged_logits - adapted_logits).abs().max()))


if __name__ == "__main__":
    main()
