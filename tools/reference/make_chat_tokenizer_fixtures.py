"""A tiny chat tokenizer for every Hugging Face family fixture, so `dew chat` runs on them.

The family fixtures (make_hf_family_fixtures.py) have 128-token vocabularies and no tokenizer. This writes,
beside config.json in each tests/fixtures/hf/FAMILY/ that is a causal decoder (not llada, dream):
  tokenizer.json         a character-level BPE of exactly 128 ids, built by the `tokenizers` library:
                         0 <pad>, 1 <s>, 2 </s> (the fixtures' pad/bos/eos ids), 3 <|user|>, 4 <|assistant|>,
                         5 <|end|> (special added tokens), 6.. newline and printable ASCII, then 26 merges
                         ("hi", "th", ...) to fill the vocabulary; decoder Fuse
  tokenizer_config.json  bos/eos/pad tokens and a chat_template:
                         <s><|user|>\\n{content}<|end|>\\n ... <|assistant|>\\n
and checks that transformers' PreTrainedTokenizerFast reads the directory and renders and encodes the
template the same way.
The model files are not touched.

    ~/.cache/dew/venv-reference/bin/python tools/reference/make_chat_tokenizer_fixtures.py
(tokenizers and transformers as pinned in requirements.txt.)
"""
import json
import pathlib

import transformers as T
from tokenizers import AddedToken, Tokenizer, decoders, models

HF = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "hf"
SPECIALS = ["<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|end|>"]
MERGES = [("h", "i"), ("t", "h"), ("e", "r"), ("i", "n"), ("a", "n"), ("o", "n"), ("r", "e"), ("e", "n"), ("a", "t"),
          ("o", "r"), ("e", "s"), ("t", "o"), ("i", "s"), ("i", "t"), ("a", "r"), ("e", "d"), ("n", "d"), ("h", "e"),
          ("o", "u"), ("l", "e"), ("s", "t"), ("a", "l"), ("i", "o"), ("n", "g"), ("a", "s"), ("l", "l")]
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
SKIP = {"llada", "dream"}  # masked-diffusion fixtures: dew chat refuses nothing there, but they are not decoders


def build():
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for c in ["\n"] + [chr(i) for i in range(32, 127)]:
        vocab[c] = len(vocab)
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    assert len(vocab) == 128, len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=MERGES))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return tok


def main():
    tok = build()
    config = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "add_bos_token": False,
              "model_max_length": 64, "chat_template": TEMPLATE, "tokenizer_class": "PreTrainedTokenizerFast"}
    for family in sorted(p for p in HF.iterdir() if (p / "config.json").exists() and p.name not in SKIP):
        tok.save(str(family / "tokenizer.json"))
        (family / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
        # transformers renders the template as written (its per-family tokenizer classes may rebuild the
        # pipeline, so the ids are the tokenizers library's own).
        theirs = T.PreTrainedTokenizerFast.from_pretrained(family)
        text = theirs.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
        assert text == "<s><|user|>\nhi<|end|>\n<|assistant|>\n", text
        ids = tok.encode(text).ids
        assert ids == theirs(text, add_special_tokens=False)["input_ids"] and tok.decode(ids, skip_special_tokens=False) == text, ids
        print(family.name, ids)


if __name__ == "__main__":
    main()
