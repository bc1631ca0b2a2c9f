"""fp8 block-scaled checkpoints (the FineGrainedFP8 / DeepSeek-V3 layout) for dew's loader.

Takes the tiny llama of make_hf_family_fixtures.py (same seed, so the same weights), quantizes every Linear
weight of the decoder layers to float8_e4m3fn in BxB blocks with torch's own float8 dtype
(scale = block amax / 448, stored as the float32 `<name>_scale_inv`), and writes under
tests/fixtures/hf_fp8/llama_bB/:
  config.json        the llama config plus quantization_config {"quant_method": "fp8", "fmt": "e4m3",
                     "activation_scheme": "dynamic", "weight_block_size": [B, B], "modules_to_not_convert": ["lm_head"]}
  model.safetensors  F8_E4M3 weights, F32 scales, everything else float32 as before
  io.safetensors     ids [2, S]; logits [2, S, V] of the plain model on the dequantized weights
                     (fp8 value * block scale in float32); q_proj0 = layer 0's dequantized q_proj weight;
                     prompt0 / greedy0: a greedy continuation of that model
B = 16 (several blocks per matrix) and B = 128 (one partial block per matrix, DeepSeek-V3's size). Also
checks that transformers' own fp8 loader (FineGrainedFP8Config(dequantize=True), CPU) reads the directory
and gives the same logits, so the layout is the one transformers reads.

    HF_HUB_OFFLINE=1 ~/.cache/dew/venv-reference/bin/python tools/reference/make_fp8_fixtures.py
(torch 2.11, transformers 5.24; deterministic: fixed seeds, float32, CPU, eager attention.)
"""
import json
import pathlib
import sys

import torch
import transformers as T
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_hf_family_fixtures as families  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "hf_fp8"
E4M3_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max


def quantize(w, block):
    """w [out, in] float32 -> (fp8 [out, in], scale_inv [ceil(out/B), ceil(in/B)] float32)."""
    rows, cols = w.shape
    br, bc = -(-rows // block), -(-cols // block)
    padded = torch.zeros(br * block, bc * block)
    padded[:rows, :cols] = w
    blocks = padded.view(br, block, bc, block)
    scale = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-12) / E4M3_MAX
    q = (blocks / scale[:, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q.view(br * block, bc * block)[:rows, :cols].contiguous(), scale.float()


def dequantize(q, scale_inv, block):
    rows, cols = q.shape
    s = scale_inv.repeat_interleave(block, 0).repeat_interleave(block, 1)[:rows, :cols]
    return q.float() * s


def main():
    for block in (16, 128):
        out = OUT / f"llama_b{block}"
        out.mkdir(parents=True, exist_ok=True)
        model = families.build("llama")
        state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        stored = {}
        with torch.no_grad():
            for name, module in model.named_modules():
                if isinstance(module, torch.nn.Linear) and name.startswith("model.layers."):
                    q, scale_inv = quantize(module.weight.float(), block)
                    stored[name + ".weight"] = q
                    stored[name + ".weight_scale_inv"] = scale_inv
                    module.weight.copy_(dequantize(q, scale_inv, block))
        tensors = {**state, **stored}
        save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
        config = json.loads(model.config.to_json_string())
        config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                         "weight_block_size": [block, block], "modules_to_not_convert": ["lm_head"]}
        (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

        g = torch.Generator().manual_seed(99)
        ids = torch.randint(3, families.VOCAB, (2, families.SEQ), generator=g)
        prompt = ids[0, :5]
        with torch.no_grad():
            logits = model(input_ids=ids).logits
            gen = model.generate(prompt.unsqueeze(0), attention_mask=torch.ones(1, 5, dtype=torch.long),
                                 max_new_tokens=families.NEW, min_new_tokens=families.NEW, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
            # transformers' own reading of the same directory, dequantized on the CPU.
            theirs = T.AutoModelForCausalLM.from_pretrained(
                out, quantization_config=T.FineGrainedFP8Config(dequantize=True), dtype=torch.float32,
                attn_implementation="eager").eval()
            their_logits = theirs(input_ids=ids).logits
        gap = float((their_logits - logits).abs().max())
        assert gap < 1e-5, f"transformers' fp8 loader disagrees by {gap}"
        q_proj0 = "model.layers.0.self_attn.q_proj.weight"
        save_file({"ids": ids, "logits": logits.contiguous(),
                   "q_proj0": dequantize(stored[q_proj0], stored[q_proj0 + "_scale_inv"], block),
                   "prompt0": prompt.clone(), "greedy0": gen[0, 5:].clone()}, out / "io.safetensors")
        print(f"block {block}: transformers' fp8 loader within {gap}; greedy {gen[0, 5:].tolist()}")


if __name__ == "__main__":
    main()
