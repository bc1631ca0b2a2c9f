#!/usr/bin/env python3
"""Reference data for dew's BPE trainer (tests/text_bpe_trainer_test.cpp, tests/tokenizer_command_test.cpp).

    pip install -c tools/reference/requirements.txt tokenizers   # the pinned version
    python3 tools/reference/make_trained_tokenizer_fixtures.py build/bin/dew

Runs `dew tokenizer train` on the first 400,000 bytes of the Austen corpus (vocab 2000, min frequency 2,
special token <|endoftext|>) and writes tests/fixtures/trained_bpe/:
  tokenizer.json   what dew wrote (the test retrains and expects these exact bytes)
  expected.json    the slices used (offset, length, sha256: book text is never committed), the ids that
                   Hugging Face `tokenizers` gives with that tokenizer.json for hard strings (with special
                   tokens matched, and as plain text) and for a 100,000-byte slice from later in the corpus,
                   and whether Hugging Face's own BpeTrainer, on the same slice and settings, learns the same
                   vocabulary and merges (informational; dew does not promise it).
The corpus is ~/.cache/dew/data/austen.txt (made by dew's set-up script; DEW_CACHE moves it).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import tokenizers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "trained_bpe"
CORPUS = Path(os.environ.get("DEW_CACHE", Path.home() / ".cache" / "dew")) / "data" / "austen.txt"

TRAIN_OFFSET, TRAIN_LENGTH = 0, 400_000
PROSE_OFFSET, PROSE_LENGTH = 2_000_000, 100_000
VOCAB_SIZE, MIN_FREQUENCY, SPECIALS = 2000, 2, ["<|endoftext|>"]

HARD_STRINGS = [
    "",
    "Hello world",
    "Hello, world!",
    " The quick brown fox jumps over the lazy dog.",
    "It's 2024: naïve café — déjà vu 🦄",
    "I'd've thought you'll say it's theirs; we're sure they'd WON'T, can't, I'M",
    "1234567890 3.14159 1,000,000 -42 ²³ ٣٤ 0x1F",
    "  leading spaces\ttabs\t\tand   runs \n\n\n  trailing   ",
    "\r\n\r\nwindows\r\nlines\r\n",
    "non\u00a0breaking\u3000ideographic\u2009thin spaces",
    "\n", " ", "  ", "\t",
    "👩‍👩‍👧‍👦 family, 🇫🇷 flag, ❤️ heart, ✨😀😃😄",
    "日本語のテキスト、中文，한국어",
    "Ελληνικά русский עברית العربية हिन्दी",
    "e\u0301 (combining acute), ﬁ ligature, zero\u200bwidth",
    "<|endoftext|>",
    "Once upon a time.<|endoftext|>The end",
    "<|endoftext|><|endoftext|> twice",
    "<|endoftext| almost, <|endoftext|>> and <||>",
    "\"My dear Mr. Bennet,\" said his lady to him one day, \"have you heard that Netherfield Park is let at last?\"",
    "Supercalifragilisticexpialidocious" * 3,
    "CHAPTER XLVII.\n\n\nElizabeth had been a good deal disappointed",
]


def corpus_slice(data, offset, length):
    piece = data[offset:offset + length]
    piece.decode("utf-8")  # the slices must be whole characters
    return piece, {"offset": offset, "length": len(piece), "sha256": hashlib.sha256(piece).hexdigest()}


def hf_ids(tok, text, special):
    tok.encode_special_tokens = not special
    return tok.encode(text, add_special_tokens=False).ids


def hf_trainer_agrees(train_text, dew_json):
    """Trains with Hugging Face's BpeTrainer on the same text and settings; True if vocab and merges match."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=MIN_FREQUENCY, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([train_text], trainer=trainer)
    hf = json.loads(tok.to_str())["model"]
    ours = dew_json["model"]

    def pairs(merges):
        return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]

    return hf["vocab"] == ours["vocab"] and pairs(hf["merges"]) == pairs(ours["merges"])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_trained_tokenizer_fixtures.py PATH/TO/dew")
    dew = Path(sys.argv[1]).resolve()
    if not CORPUS.exists():
        sys.exit(f"{CORPUS} is missing: run scripts/setup.sh first")
    data = CORPUS.read_bytes()
    train, train_info = corpus_slice(data, TRAIN_OFFSET, TRAIN_LENGTH)
    prose, prose_info = corpus_slice(data, PROSE_OFFSET, PROSE_LENGTH)

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.txt").write_bytes(train)
        command = [str(dew), "tokenizer", "train", "--input", str(Path(tmp) / "train.txt"), "--out",
                   str(Path(tmp) / "out"), "--vocab-size", str(VOCAB_SIZE), "--min-frequency", str(MIN_FREQUENCY)]
        for special in SPECIALS:
            command += ["--special-token", special]
        subprocess.run(command, check=True)
        OUT.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(tmp) / "out" / "tokenizer.json", OUT / "tokenizer.json")

    tok = Tokenizer.from_file(str(OUT / "tokenizer.json"))
    dew_json = json.loads((OUT / "tokenizer.json").read_text(encoding="utf-8"))
    cases = [{"text": t, "plain": hf_ids(tok, t, False), "special": hf_ids(tok, t, True)} for t in HARD_STRINGS]
    prose_text = prose.decode("utf-8")
    prose_info["ids"] = hf_ids(tok, prose_text, False)
    assert tok.decode(prose_info["ids"], skip_special_tokens=False) == prose_text
    agrees = hf_trainer_agrees(train.decode("utf-8"), dew_json)

    expected = {
        "generator": "tools/reference/make_trained_tokenizer_fixtures.py",
        "tokenizers_version": tokenizers.__version__,
        "corpus": "~/.cache/dew/data/austen.txt (Jane Austen's novels, public domain; made by scripts/setup.sh)",
        "train": {**train_info, "vocab_size": VOCAB_SIZE, "min_frequency": MIN_FREQUENCY, "special_tokens": SPECIALS},
        "hf_trainer_learns_the_same_vocab_and_merges": agrees,
        "cases": cases,
        "prose": prose_info,
    }
    # One line per top-level field and per case: diffable, without one line per id.
    lines = []
    for key, value in expected.items():
        if key == "cases":
            rows = ",\n".join("  " + json.dumps(case, ensure_ascii=False) for case in value)
            lines.append(f' "cases": [\n{rows}\n ]')
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    (OUT / "expected.json").write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(cases)} strings, {len(prose_info['ids'])} prose ids; "
          f"Hugging Face's trainer learns the same vocab and merges: {agrees}")


if __name__ == "__main__":
    main()
