"""Checks a GGUF file dew's save_gguf_model wrote, with gguf-py and (when it loads the architecture) transformers.

    HF_HUB_OFFLINE=1 python tools/reference/check_gguf_export.py FILE REFERENCE [--tolerance 1e-4] [--no-transformers]

REFERENCE is a safetensors file dew writes alongside: every GGUF tensor by its GGUF name, as float32 in PyTorch
dimension order, the way dew reads it back (dequantized), plus "dew.ids" [S] (int64) and "dew.logits" [S, V]
(float32): the logits of the model dew loads back from FILE. Checks, independently of dew's reader:
  - the file parses with gguf.GGUFReader; general.architecture, general.file_type, tokenizer.ggml.model are set;
  - every tensor dequantized with gguf.quants equals REFERENCE's (exactly for F32/F16, 1e-6 for Q8_0, since both
    sides compute d * q in float32); norms and 1-D tensors are F32; no tensor is missing or extra;
  - every tensor name is one of gguf-py's MODEL_TENSORS for the architecture (the names llama.cpp looks up);
  - unless --no-transformers, transformers' GGUF loader (AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)) builds the model and its
    logits on dew.ids are within --tolerance of dew's (both read the same dequantized weights).
Prints one line of numbers; exits 0 when all hold, 1 otherwise. tests/interop_gguf_export_test.cpp runs it when
DEW_REFERENCE_PYTHON names a Python with gguf, safetensors, torch and transformers; tests/interop_gguf_families_test.cpp
runs it with --no-transformers, since transformers' GGUF loader fills what llama.cpp's metadata leaves out with
its own defaults (gemma2's query_pre_attn_scalar 256, ...), so its logits are no reference for those families.
"""
import argparse
import os
import re
import sys

import numpy as np
import torch
from gguf import MODEL_ARCH_NAMES, MODEL_TENSORS, TENSOR_NAMES, GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize
from safetensors.torch import load_file

FILE_TYPES = {0: "F32", 1: "F16", 7: "Q8_0"}


def field_value(reader, key):
    field = reader.get_field(key)
    if field is None:
        return None
    return field.contents()


def tensor_values(tensor):
    """A GGUF tensor as float32 in PyTorch order (the reverse of ggml's dimension order)."""
    shape = tuple(int(d) for d in reversed(tensor.shape))
    if tensor.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        values = np.array(tensor.data, dtype=np.float32)
    else:
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
    return torch.from_numpy(np.array(values, dtype=np.float32).reshape(shape))


def transformers_model(path, head_dim):
    """transformers' model of the GGUF file, or why it could not build one."""
    try:
        from transformers import AutoConfig, AutoModelForCausalLM
        directory, name = os.path.split(os.path.abspath(path))
        config = AutoConfig.from_pretrained(directory, gguf_file=name)
        # transformers' qwen3 GGUF config ignores attention.key_length (its default head_dim is 128).
        config.head_dim = int(head_dim)
        return AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, config=config,
                                                    dtype=torch.float32).eval()
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:200]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("reference")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--no-transformers", action="store_true", help="skip the transformers comparison")
    args = parser.parse_args()

    reader = GGUFReader(args.file)
    reference = load_file(args.reference)
    problems = []
    arch = field_value(reader, "general.architecture")
    file_type = field_value(reader, "general.file_type")
    if field_value(reader, "tokenizer.ggml.model") != "gpt2":
        problems.append("tokenizer.ggml.model is not gpt2")
    tokens = field_value(reader, "tokenizer.ggml.tokens")
    if tokens is None or len(tokens) != int(field_value(reader, f"{arch}.vocab_size")):
        problems.append("tokenizer.ggml.tokens and vocab_size disagree")

    arch_enum = next((a for a, n in MODEL_ARCH_NAMES.items() if n == arch), None)
    if arch_enum is None:
        problems.append(f"general.architecture {arch!r} is not an architecture gguf-py knows")
    known = {TENSOR_NAMES[t] for t in MODEL_TENSORS.get(arch_enum, [])}

    worst_tensor = 0.0
    names = set()
    for tensor in reader.tensors:
        names.add(tensor.name)
        if re.sub(r"^blk\.\d+\.", "blk.{bid}.", tensor.name).rsplit(".", 1)[0] not in known:
            problems.append(f"{tensor.name}: not a tensor of gguf-py's {arch} architecture")
        if tensor.name not in reference:
            problems.append(f"{tensor.name}: not in the reference")
            continue
        if (len(tensor.shape) == 1 or tensor.name.endswith("_norm.weight")) and \
                tensor.tensor_type != GGMLQuantizationType.F32:
            problems.append(f"{tensor.name}: {tensor.tensor_type.name}, llama.cpp keeps it F32")
        got, want = tensor_values(tensor), reference[tensor.name]
        if got.shape != want.shape:
            problems.append(f"{tensor.name}: shape {tuple(got.shape)}, dew's {tuple(want.shape)}")
            continue
        limit = 0.0 if tensor.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16) else 1e-6
        diff = (got - want).abs().max().item()
        worst_tensor = max(worst_tensor, diff)
        if diff > limit:
            problems.append(f"{tensor.name}: |gguf-py - dew| = {diff:.3g} > {limit:g}")
    missing = {n for n in reference if not n.startswith("dew.")} - names
    if missing:
        problems.append(f"tensors missing from the file: {sorted(missing)}")
    line = (f"{arch} {FILE_TYPES.get(file_type, file_type)}: {len(names)} tensors, max |gguf-py - dew| = "
            f"{worst_tensor:.3g}")

    head_dim = field_value(reader, f"{arch}.attention.key_length")
    if head_dim is None:  # absent: embedding_length / head_count
        head_dim = int(field_value(reader, f"{arch}.embedding_length")) // \
            int(field_value(reader, f"{arch}.attention.head_count"))
    model = None if args.no_transformers else transformers_model(args.file, head_dim)
    if isinstance(model, str):  # an architecture transformers' GGUF loader lacks is reported, not failed
        line += f"; transformers could not load it ({model})"
        model = None
    if model is not None:
        with torch.no_grad():
            logits = model(input_ids=reference["dew.ids"].unsqueeze(0)).logits[0].float()
        want = reference["dew.logits"]
        if logits.shape != want.shape:
            problems.append(f"logits shape {tuple(logits.shape)}, dew's {tuple(want.shape)}")
        else:
            diff = (logits - want).abs().max().item()
            line += f"; {type(model).__name__} max |transformers - dew| logits = {diff:.3g}"
            if diff > args.tolerance:
                problems.append(f"logits differ by {diff:.3g} > {args.tolerance:g}")
    print(line + ("; PROBLEMS: " + "; ".join(problems) if problems else "; ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
