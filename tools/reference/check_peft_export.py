"""Checks a dew peft adapter export with PyPI peft itself.

    HF_HUB_OFFLINE=1 python tools/reference/check_peft_export.py BASE_DIR ADAPTER_DIR LOGITS_FILE [--tolerance 1e-5]

BASE_DIR is the base model as a Hugging Face directory (config.json + safetensors; what `dew export --format hf`
writes of the run's model without its adapters, or the directory the run was fine-tuned from). ADAPTER_DIR is
what dew's write_peft_adapter wrote (adapter_config.json, adapter_model.safetensors). LOGITS_FILE is a safetensors
file with "ids" [B, S] (int64) and "logits" [B, S, V] (float32): dew's logits of the adapted model on those ids.
Loads BASE_DIR with AutoModelForCausalLM (local files only, float32, eager attention), puts the adapter on it with
PeftModel.from_pretrained, computes its logits and exits 0 when the largest absolute difference is within the
tolerance, 1 otherwise. Also reports the difference to the base model alone, so an adapter that loaded but was
ignored (all logits equal to the base's) shows, and fails when a tensor of the file names no adapter peft made on
the model, or an adapter peft made has no tensor in the file (peft only warns about either: a tensor under another
family's module names would be dropped). Prints the adapter's target modules and the differences either way.
"""
import argparse
import pathlib
import sys

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base_dir")
    parser.add_argument("adapter_dir")
    parser.add_argument("logits_file")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()

    reference = load_file(args.logits_file)
    base = AutoModelForCausalLM.from_pretrained(args.base_dir, local_files_only=True, dtype=torch.float32,
                                                attn_implementation="eager").eval()
    with torch.no_grad():
        base_logits = base(input_ids=reference["ids"]).logits.float()
    model = PeftModel.from_pretrained(base, args.adapter_dir, local_files_only=True).eval()
    stored = set(load_file(str(pathlib.Path(args.adapter_dir) / "adapter_model.safetensors")))
    made = {name.replace(".default", "") for name, _ in model.named_parameters() if ".lora_" in name}
    if stored != made:
        print(f"peft: tensors no adapter takes: {sorted(stored - made)[:4]}; adapters without a tensor: {sorted(made - stored)[:4]}")
        return 1
    with torch.no_grad():
        logits = model(input_ids=reference["ids"]).logits.float()
    if logits.shape != reference["logits"].shape:
        print(f"peft: logits shape {tuple(logits.shape)}, dew's {tuple(reference['logits'].shape)}")
        return 1
    diff = (logits - reference["logits"]).abs().max().item()
    moved = (logits - base_logits).abs().max().item()
    ok = diff <= args.tolerance and moved > args.tolerance
    targets = sorted(model.peft_config["default"].target_modules)
    print(f"peft LoRA on {type(base).__name__} ({', '.join(targets)}): max |peft - dew| = {diff:.3g}, "
          f"max |adapted - base| = {moved:.3g} ({'ok' if ok else 'over'} {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
