#!/usr/bin/env python3
"""Reference ids for dew's byte-level BPE tokenizer (tests/text_bpe_tokenizer_test.cpp).

    pip install -c tools/reference/requirements.txt tokenizers tiktoken   # the pinned versions
    python3 tools/reference/make_tokenizer_fixtures.py

Writes tests/fixtures/tokenizers/:
  gpt2_cases.json        GPT-2 ids of hard strings, each checked to agree between Hugging Face `tokenizers`
                         (assets/tokenizers/gpt2/tokenizer.json) and `tiktoken` built offline from
                         encoder.json + vocab.bpe; plus the ids of a ~300 KB slice of the Austen corpus, stored
                         as offset, length and sha256 of the slice (book text is never committed).
  llama3_style/          a small Llama-3-style tokenizer (Split regex + ByteLevel(use_regex=false),
                         ignore_merges, merges as pairs, specials, a tokenizer_config.json naming the EOS),
                         trained here on the corpus with `tokenizers`, and its reference ids.
  smollm_style/          a small SmolLM-style one (Digits(individual) + ByteLevel(use_regex=true), merges as
                         "a b" strings, no tokenizer_config.json), and its reference ids.
The corpus is ~/.cache/dew/data/austen.txt (made by dew's set-up script).
"""
import hashlib
import json
import os
import sys
from pathlib import Path

import tiktoken
import tiktoken.load
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "tokenizers"
GPT2_FILES = Path(os.environ.get("GPT2_FILES", "/work/shared/data/gpt2"))
CORPUS = Path.home() / ".cache" / "dew" / "data" / "austen.txt"

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def hard_strings():
    cases = [
        "", "a", " ", "  ", "\n", "\t", "Hello world", "Hello, world!",
        " The quick brown fox jumps over the lazy dog.",
        "It's 2024: naïve café — déjà vu 🦄",
        # contractions, lower and upper case, and near misses
        "it's don't they're we've I'm you'll he'd", "IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D",
        "'s 't 're 've 'm 'll 'd 'x 'S 'LL", "rock'n'roll o'clock ''' 'sup 'tis",
        # whitespace runs: spaces, tabs, newlines, trailing and leading
        "a  b   c    d", "a\tb\t\tc", "line one\nline two\n\nline four\n", "   leading", "trailing   ",
        "trailing tab\t", "\n\n\n", " \n \n", "\r\n\r\nwindows\r\n", "mixed \t\n \t words",
        "a \u00a0b\u2003c\u3000d\u2028e\u0085f", "\u000b\u000c vertical tab and form feed",
        "\x00\x01\x1c\x1f control \x7f",
        # numbers of many lengths
        "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890",
        "3.14159 2,718 -42 +7 1e10 0x1F 1_000_000", " 2024 year 99 bottles", "٣٤٥ ½ Ⅻ ①②",
        # Unicode: accents, CJK, emoji (multi-codepoint too), scripts
        "Ünïcödé ÀÉÎÕÜ ß ø å", "日本語のテキストです。中文文本。한국어 텍스트", "Привет, мир! Γειά σου κόσμε",
        "مرحبا بالعالم שלום עולם", "नमस्ते दुनिया", "🦄🌈 👨‍👩‍👧‍👦 🇫🇷 👍🏽", "e\u0301 combining a\u030a",
        "math ∑∫√∞ ≠ ≤ arrows → ⇒", "zero\u200bwidth\u200djoiner",
        # punctuation runs and code
        "!!! ??? ... --- *** ((()))", "def f(x):\n    return x**2  # comment\n", "{\"json\": [1, 2, 3]}",
        "<html><body>Hi</body></html>", "user@example.com https://example.org/a?b=c&d=e",
        # long pieces (exercise the long-piece merge path)
        "a" * 1000, " " * 500, "\n" * 300, "ab" * 200, "x" * 70 + "yz" * 40,
        "Pneumonoultramicroscopicsilicovolcanoconiosis" * 3, "9" * 100, "!" * 150,
        # the special token, alone and in text
        "<|endoftext|>", "Hello<|endoftext|>world", "<|endoftext|><|endoftext|>", " <|endoftext|> ",
        "<|endoftext", "<|endoftext|", "endoftext|>",
    ]
    return cases


def tiktoken_gpt2():
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(GPT2_FILES / "vocab.bpe"), encoder_json_file=str(GPT2_FILES / "encoder.json"))
    return tiktoken.Encoding(name="gpt2-offline", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


def hf_ids(tok, text, special):
    tok.encode_special_tokens = not special
    return tok.encode(text, add_special_tokens=False).ids


def corpus_slice(offset, length):
    data = CORPUS.read_bytes()
    piece = data[offset:offset + length]
    return piece, {"source": "~/.cache/dew/data/austen.txt", "offset": offset, "length": len(piece),
                   "sha256": hashlib.sha256(piece).hexdigest()}


def reference(tok, texts, prose_offset, prose_length, tik=None):
    cases = []
    for text in texts:
        plain, special = hf_ids(tok, text, False), hf_ids(tok, text, True)
        if tik is not None:
            assert plain == tik.encode_ordinary(text), f"HF and tiktoken disagree on {text!r}"
            assert special == tik.encode(text, allowed_special="all"), f"HF and tiktoken disagree on {text!r}"
        cases.append({"text": text, "plain": plain, "special": special})
    piece, prose = corpus_slice(prose_offset, prose_length)
    prose["ids"] = hf_ids(tok, piece.decode("utf-8"), False)
    if tik is not None:
        assert prose["ids"] == tik.encode_ordinary(piece.decode("utf-8")), "HF and tiktoken disagree on the prose"
    return {"cases": cases, "prose": prose}


def write_json(path, value):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


def train_small(pre_tokenizer, specials, plain_added, vocab_size, text):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer=trainer)
    tok.add_tokens(plain_added)
    return json.loads(tok.to_str())


def main():
    if not CORPUS.exists():
        sys.exit(f"{CORPUS} is missing: run dew's set-up script first")
    gpt2 = Tokenizer.from_file(str(ROOT / "assets" / "tokenizers" / "gpt2" / "tokenizer.json"))
    tik = tiktoken_gpt2()
    texts = hard_strings()
    result = reference(gpt2, texts, 1_000_000, 300_000, tik)
    result["tokenizer"] = "gpt2"
    result["checked_against"] = ["tokenizers " + __import__("tokenizers").__version__, "tiktoken " + tiktoken.__version__]
    write_json(OUT / "gpt2_cases.json", result)

    train_text = CORPUS.read_bytes()[:400_000].decode("utf-8", errors="ignore")
    style_texts = texts + ["<|begin_of_text|>Hi<|end_of_text|>", "see [[note]] here [[note]]", "<|im_end|>"]

    # Llama 3 style: Split(regex, Isolated) + ByteLevel(use_regex=false), ignore_merges, pair merges.
    llama = train_small(
        pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], ["[[note]]"], 1500, train_text)
    llama["model"]["ignore_merges"] = True
    llama["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in llama["model"]["merges"]]
    llama_dir = OUT / "llama3_style"
    write_json(llama_dir / "tokenizer.json", llama)
    write_json(llama_dir / "tokenizer_config.json", {"eos_token": "<|eot_id|>", "tokenizer_class": "PreTrainedTokenizerFast"})
    tok = Tokenizer.from_file(str(llama_dir / "tokenizer.json"))
    ref = reference(tok, style_texts, 2_000_000, 100_000)
    ref["eos_id"] = tok.token_to_id("<|eot_id|>")
    write_json(llama_dir / "expected.json", ref)

    # SmolLM style: Digits(individual) + ByteLevel(use_regex=true), "a b" string merges, EOS by the default rule.
    smol = train_small(
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], [], 1200, train_text)
    smol["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in smol["model"]["merges"]]
    smol_dir = OUT / "smollm_style"
    write_json(smol_dir / "tokenizer.json", smol)
    tok = Tokenizer.from_file(str(smol_dir / "tokenizer.json"))
    ref = reference(tok, style_texts, 3_000_000, 100_000)
    ref["eos_id"] = tok.token_to_id("<|endoftext|>")
    write_json(smol_dir / "expected.json", ref)


if __name__ == "__main__":
    main()
