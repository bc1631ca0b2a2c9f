"""Checks a dew Hugging Face export with transformers itself.

    HF_HUB_OFFLINE=1 python tools/reference/check_hf_export.py DIR LOGITS_FILE [--tolerance 1e-5]

DIR is what dew's save_hf_model wrote (config.json, model.safetensors or shards, generation_config.json).
LOGITS_FILE is a safetensors file with "ids" [B, S] (int64) and "logits" [B, S, V] (float32): dew's logits on
those ids. Loads DIR with AutoModelForCausalLM (local files only, float32, eager attention), computes its
logits on the ids and exits 0 when the largest absolute difference is within the tolerance, 1 otherwise.
Prints the model class and the difference either way. The test tests/interop_hf_model_test.cpp runs it
when DEW_REFERENCE_PYTHON names a Python with torch and transformers.
"""
import argparse
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("logits_file")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()

    reference = load_file(args.logits_file)
    model = AutoModelForCausalLM.from_pretrained(args.dir, local_files_only=True, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    with torch.no_grad():
        logits = model(input_ids=reference["ids"]).logits.float()
    if logits.shape != reference["logits"].shape:
        print(f"{type(model).__name__}: logits shape {tuple(logits.shape)}, dew's {tuple(reference['logits'].shape)}")
        return 1
    diff = (logits - reference["logits"]).abs().max().item()
    ok = diff <= args.tolerance
    print(f"{type(model).__name__}: max |transformers - dew| = {diff:.3g} ({'ok' if ok else 'over'} {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
