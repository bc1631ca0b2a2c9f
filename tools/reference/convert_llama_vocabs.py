#!/usr/bin/env python3
"""transformers' GGUF tokenizer conversion of llama.cpp's test vocabularies, for tests/text_gguf_vocab_test.cpp.

    ~/.cache/dew/venv-reference/bin/python tools/reference/convert_llama_vocabs.py [VOCAB_DIR [OUT_DIR]]

VOCAB_DIR (default ~/.cache/dew/llama-vocabs, filled by scripts/setup.sh) holds llama-cpp-python 0.3.36's
ggml-vocab-*.gguf with their .inp cases. For each vocabulary transformers (pinned in requirements.txt) can
convert, writes OUT_DIR/NAME/ (default ~/.cache/dew/llama-vocabs-hf): tokenizer.json and tokenizer_config.json
as transformers saves them, and cases.json: for every .inp text, the ids Hugging Face `tokenizers` gives with
that tokenizer.json (no special tokens) and whether they equal llama.cpp's .out ids. Nothing here is committed
(the files are as large as the vocabularies).
"""
import json
import sys
from pathlib import Path

from transformers import AutoTokenizer

SEPARATOR = "\n__ggml_vocab_test__\n"


def cases(gguf):
    texts = Path(str(gguf) + ".inp").read_bytes().decode("utf-8", errors="surrogateescape").split(SEPARATOR)
    outs = Path(str(gguf) + ".out").read_text().split("\n")
    return [(t, [int(x) for x in o.split()]) for t, o in zip(texts, outs)]


def main():
    vocab_dir = Path(sys.argv[1] if len(sys.argv) > 1 else Path.home() / ".cache/dew/llama-vocabs")
    out_dir = Path(sys.argv[2] if len(sys.argv) > 2 else Path.home() / ".cache/dew/llama-vocabs-hf")
    for inp in sorted(vocab_dir.glob("ggml-vocab-*.gguf.inp")):
        gguf = Path(str(inp)[: -len(".inp")])
        name = gguf.name[len("ggml-vocab-"): -len(".gguf")]
        try:
            tok = AutoTokenizer.from_pretrained(str(vocab_dir), gguf_file=gguf.name)
        except Exception as e:  # a model kind transformers cannot convert: say so, go on
            print(f"{name}: transformers cannot convert it: {type(e).__name__}: {str(e)[:200]}")
            continue
        target = out_dir / name
        target.mkdir(parents=True, exist_ok=True)
        tok.save_pretrained(str(target))
        backend = tok.backend_tokenizer
        rows = []
        for text, llama_ids in cases(gguf):
            ids = backend.encode(text, add_special_tokens=False).ids
            rows.append({"text": text, "ids": ids, "equals_llama_cpp": ids == llama_ids})
        (target / "cases.json").write_text(json.dumps(rows, ensure_ascii=False) + "\n")
        same = sum(r["equals_llama_cpp"] for r in rows)
        print(f"{name}: {same} of {len(rows)} cases equal llama.cpp's ids")


if __name__ == "__main__":
    main()
