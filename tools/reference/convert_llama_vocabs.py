#!/usr/bin/env python3
"""transformers' GGUF tokenizer conversion of llama.cpp's test vocabularies, for tests/text_gguf_vocab_test.cpp.

    ~/.cache/dew/venv-reference/bin/python tools/reference/convert_llama_vocabs.py [VOCAB_DIR [OUT_DIR]]

VOCAB_DIR (default ~/.cache/dew/llama-vocabs, filled by scripts/setup.sh) holds llama-cpp-python 0.3.36's
ggml-vocab-*.gguf with their .inp cases. For each vocabulary transformers (pinned in requirements.txt) can
convert, writes OUT_DIR/NAME/ (default ~/.cache/dew/llama-vocabs-hf): tokenizer.json and tokenizer_config.json
as transformers saves them, and cases.json: for every .inp text, the ids Hugging Face `tokenizers` gives with
that tokenizer.json (no special tokens) and whether they equal llama.cpp's .out ids. Nothing here is committed
(the files are as large as the vocabularies).

No .inp/.out comes with the one Unigram vocabulary (ggml-vocab-nomic-bert-moe.gguf, tokenizer.ggml.model
"t5": XLM-R's 250,002 pieces and SentencePiece's nmt_nfkc charsmap), and transformers cannot convert its
architecture, so OUT_DIR/nomic-bert-moe-t5/ is built here with `tokenizers` from the GGUF's own pieces, scores
and charsmap, the way dew reads a "t5" GGUF (Precompiled, Strip, Replace(" {2,}", " "), Metaspace(always),
Unigram), with Hugging Face's ids for llama-spm's .inp texts and a few more: a check of dew's charsmap trie
and Viterbi on real SentencePiece data.
"""
import json
import sys
from pathlib import Path

import gguf
from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers
from transformers import AutoTokenizer

SEPARATOR = "\n__ggml_vocab_test__\n"


def cases(gguf):
    texts = Path(str(gguf) + ".inp").read_bytes().decode("utf-8", errors="surrogateescape").split(SEPARATOR)
    outs = Path(str(gguf) + ".out").read_text().split("\n")
    return [(t, [int(x) for x in o.split()]) for t, o in zip(texts, outs)]


EXTRA_TEXTS = ["Ｆｕｌｌｗｉｄｔｈ ﬁne ①② ½ ™ …", "  doubled   spaces\tand\ttabs  ", "Ünïcödé e\u0301 Å", "日本語のテキスト"]


def t5_from_gguf(gguf_path, texts, target):
    reader = gguf.GGUFReader(str(gguf_path))
    field = lambda key: reader.fields[key].contents()
    tokens, scores, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.scores"), field("tokenizer.ggml.token_type")
    charsmap = bytes(int(b) & 0xFF for b in field("tokenizer.ggml.precompiled_charsmap"))
    unk = int(field("tokenizer.ggml.unknown_token_id"))
    tok = Tokenizer(models.Unigram(list(zip(tokens, [float(x) for x in scores])), unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap), normalizers.Strip(left=True, right=True),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, types) if int(k) == 3])
    target.mkdir(parents=True, exist_ok=True)
    tok.save(str(target / "tokenizer.json"))
    rows = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in texts]
    (target / "cases.json").write_text(json.dumps(rows, ensure_ascii=False) + "\n")
    print(f"nomic-bert-moe-t5: built from the GGUF, {len(rows)} cases")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    vocab_dir = Path(args[0] if args else Path.home() / ".cache/dew/llama-vocabs")
    out_dir = Path(args[1] if len(args) > 1 else Path.home() / ".cache/dew/llama-vocabs-hf")
    t5 = vocab_dir / "ggml-vocab-nomic-bert-moe.gguf"
    if t5.exists():
        texts = [t for t, _ in cases(vocab_dir / "ggml-vocab-llama-spm.gguf")] + EXTRA_TEXTS
        t5_from_gguf(t5, texts, out_dir / "nomic-bert-moe-t5")
    if "--t5-only" in sys.argv:
        return
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
