#!/usr/bin/env python3
"""Reference ids for dew's tokenizer.json pipeline (tests/text_tokenizer_parity_test.cpp).

    ~/.cache/dew/venv-reference/bin/python tools/reference/make_pipeline_tokenizer_fixtures.py

Needs only `tokenizers` (pinned in requirements.txt). Trains tiny tokenizers on one paragraph, shaped like
the published families, and writes tests/fixtures/pipeline_tokenizers/:
  llama2_spm/      SentencePiece-style BPE with byte_fallback: Prepend + Replace normalizers, no pre-tokenizer,
                   decoder Replace/ByteFallback/Fuse/Strip, TemplateProcessing "<s> $A", an lstrip/rstrip token
  mistral_spm/     the same model with a Metaspace(prepend_scheme=first, split=false) pre-tokenizer instead
  t5_unigram/      Unigram with a Precompiled charsmap (built here: a small Darts double-array), Replace,
                   WhitespaceSplit + Metaspace(always), Metaspace decoder, TemplateProcessing "$A </s>"
  bert_wordpiece/  BertNormalizer, BertPreTokenizer, WordPiece, WordPiece decoder, BertProcessing
  qwen2_bytelevel/ NFC, Split(regex) + ByteLevel(use_regex=false), byte-level BPE, ByteLevel decoder
  variants.json    one small BPE (continuing_subword_prefix, end_of_word_suffix) under many normalizers,
                   pre-tokenizers and decoders: each variant overrides parts of variants_base.json
Each directory holds tokenizer.json and cases.json: for every text, the ids without and with special tokens
(HF `encode(text, add_special_tokens=...)`) and `decode(ids)`.
"""
import base64
import json
import struct
from pathlib import Path

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "pipeline_tokenizers"

PARAGRAPH = """It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in
want of a wife. However little known the feelings or views of such a man may be on his first entering a
neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is considered
the rightful property of some one or other of their daughters. "My dear Mr. Bennet," said his lady to him
one day, "have you heard that Netherfield Park is let at last?" Mr. Bennet replied that he had not. It's
1813; they've 5000 pounds a year, don't they? Café naïve résumé über straße. Ｆｕｌｌｗｉｄｔｈ ﬁne ①②.
"""

CASES = [
    "", " ", "Hello world", " Hello world", "Hello  world", "  leading and trailing  ", "\n", "a\nb\n\nc\t d",
    "It's a truth; don't they've?", "The year 1813, 5000 pounds and 3.14159!", "Café naïve résumé über straße",
    "CAFÉ NAÏVE Ünïcödé", "e\u0301 combining vs \u00e9", "日本語のテキスト。中文文本。한국어", "Привет, мир!",
    "emoji 🦄🌈 👨‍👩‍👧 👍🏽", "Ｆｕｌｌｗｉｄｔｈ ﬁne ①② ½", "tab\tand\u00a0nbsp\u3000ideographic",
    "punctuation!!! ??? ... ((x)) a-b_c", "user@example.com https://example.org/a?b=c",
    "def f(x):\n    return x**2\n", "unknownqzxj wordz", "aaaaaaaaaaaaaaaaaaaa", "Mr. Bennet<s>replied</s>",
    "<s>", "</s> at start", "say <mask> here", "say<mask>here", "[CLS] [SEP] [MASK] in text", "<|im_start|>user\nhi<|im_end|>",
    "<|endoftext|>tail", "special <special> word", "xspecial_wordx special_word",
]


def train_bpe(vocab_size, alphabet_limit, special, prefix=None, suffix=None, byte_fallback=False):
    extra = {k: v for k, v in {"continuing_subword_prefix": prefix, "end_of_word_suffix": suffix}.items() if v}
    model = models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=byte_fallback, **extra)
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, limit_alphabet=alphabet_limit,
                                  show_progress=False, **extra)
    tok.train_from_iterator([PARAGRAPH], trainer)
    return json.loads(tok.to_str())


def with_byte_tokens(spec, specials):
    """SentencePiece layout: specials, then <0x00>..<0xFF>, then the learned pieces."""
    old = spec["model"]["vocab"]
    order = specials + [f"<0x{b:02X}>" for b in range(256)]
    order += [t for t, _ in sorted(old.items(), key=lambda kv: kv[1]) if t not in specials]
    spec["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    spec["added_tokens"] = [dict(a, id=order.index(a["content"])) for a in spec["added_tokens"]]
    return spec


def spm_added(spec):
    spec["added_tokens"].append({"id": len(spec["model"]["vocab"]), "content": "<mask>", "single_word": False,
                                 "lstrip": True, "rstrip": True, "normalized": False, "special": True})
    spec["added_tokens"].append({"id": len(spec["model"]["vocab"]) + 1, "content": "special_word", "single_word": True,
                                 "lstrip": False, "rstrip": False, "normalized": True, "special": False})
    return spec


def llama2(spm):
    spec = json.loads(json.dumps(spm))
    spec["normalizer"] = json.loads(normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]).__getstate__())
    spec["pre_tokenizer"] = None
    return spec


def mistral(spm):
    spec = json.loads(json.dumps(spm))
    spec["normalizer"] = None
    spec["pre_tokenizer"] = json.loads(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False).__getstate__())
    return spec


def spm_common(spec):
    spec["decoder"] = json.loads(decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                                    decoders.Strip(" ", 1, 0)]).__getstate__())
    spec["post_processor"] = json.loads(processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                                      special_tokens=[("<s>", 1)]).__getstate__())
    spec["model"]["ignore_merges"] = False
    return spec


# ---- A small Darts-clone double array, as SentencePiece stores its normalization rules ----
def build_charsmap(rules):
    blob = b""
    values = {}
    for src, dst in rules.items():
        values[src.encode()] = len(blob)
        blob += dst.encode() + b"\0"
    trie = {}
    for key in values:
        node = trie
        for b in key:
            node = node.setdefault(b, {})
        node[None] = values[key]
    units = [0] * 1024
    used = {0}

    def place(node, pos, label):
        labels = sorted(k for k in node if k is not None)
        need = labels + ([0] if None in node else [])
        offset = 1
        while True:
            base = pos ^ offset
            slots = [base ^ c for c in need]
            if base != 0 and all(s not in used for s in slots) and offset < (1 << 21):
                break
            offset += 1
        for s in slots:
            used.add(s)
            while s >= len(units):
                units.extend([0] * 1024)
        has_leaf = 1 if None in node else 0
        units[pos] = (offset << 10) | (has_leaf << 8) | label
        if has_leaf:
            units[base] = node[None] | (1 << 31)
        for c in labels:
            place(node[c], base ^ c, c)

    place(trie, 0, 0)
    size = max(used) + 1
    trie_bytes = b"".join(struct.pack("<I", u) for u in units[:size])
    return struct.pack("<I", len(trie_bytes)) + trie_bytes + blob


CHARSMAP_RULES = {"Ｆ": "F", "ｕ": "u", "ｌ": "l", "ｗ": "w", "ｉ": "i", "ｄ": "d", "ｔ": "t", "ｈ": "h", "ﬁ": "fi",
                  "①": "1", "②": "2", "½": "1/2", "\u00a0": " ", "\u3000": " ", "\t": " ", "\n": " ",
                  "e\u0301": "é", "…": "...", "ß": "ss", "fi": "fi"}


def t5_unigram():
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator([PARAGRAPH], trainer)
    spec = json.loads(tok.to_str())
    charsmap = base64.b64encode(build_charsmap(CHARSMAP_RULES)).decode()
    spec["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Precompiled", "precompiled_charsmap": charsmap},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    spec["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    spec["post_processor"] = json.loads(processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                                      special_tokens=[("</s>", 1)]).__getstate__())
    return spec


def bert_wordpiece():
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    tok.train_from_iterator([PARAGRAPH], trainer)
    tok.decoder = decoders.WordPiece()
    tok.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    return json.loads(tok.to_str())


QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                 r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")


def qwen2_bytelevel():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([PARAGRAPH], trainer)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return json.loads(tok.to_str())


def variants_base():
    spec = train_bpe(200, 60, ["<unk>", "<s>", "</s>"], prefix="##", suffix="</w>")
    spec["normalizer"] = None
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    spec["decoder"] = {"type": "BPEDecoder", "suffix": "</w>"}
    return spec


def st(obj):
    return json.loads(obj.__getstate__())


VARIANTS = {
    "nfkc_lowercase": {"normalizer": st(normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]))},
    "nfd_strip_accents": {"normalizer": st(normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()]))},
    "nfkd": {"normalizer": st(normalizers.NFKD())},
    "nmt_nfkc": {"normalizer": st(normalizers.Sequence([normalizers.Nmt(), normalizers.NFKC()]))},
    "strip_prepend_replace": {"normalizer": st(normalizers.Sequence([
        normalizers.Strip(left=True, right=True), normalizers.Prepend("x"), normalizers.Replace(Regex("[0-9]+"), "#")]))},
    "whitespace_split": {"pre_tokenizer": st(pre_tokenizers.WhitespaceSplit())},
    "punctuation_isolated": {"pre_tokenizer": st(pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                                          pre_tokenizers.Punctuation()]))},
    "punctuation_merged_prev": {"pre_tokenizer": st(pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="merged_with_previous")]))},
    "digits_individual": {"pre_tokenizer": st(pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                                       pre_tokenizers.Digits(individual_digits=True)]))},
    "digits_runs": {"pre_tokenizer": st(pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                                 pre_tokenizers.Digits(individual_digits=False)]))},
    "split_removed": {"pre_tokenizer": st(pre_tokenizers.Split(" ", behavior="removed"))},
    "split_merged_next": {"pre_tokenizer": st(pre_tokenizers.Split(Regex(r"\s+"), behavior="merged_with_next"))},
    "split_merged_prev": {"pre_tokenizer": st(pre_tokenizers.Split(Regex(r"[,.!?]"), behavior="merged_with_previous"))},
    "split_contiguous": {"pre_tokenizer": st(pre_tokenizers.Split(Regex(r"\s"), behavior="contiguous"))},
    "split_invert": {"pre_tokenizer": st(pre_tokenizers.Split(Regex(r"\w+"), behavior="removed", invert=True))},
    "metaspace_never": {"pre_tokenizer": st(pre_tokenizers.Metaspace(prepend_scheme="never", split=True)),
                        "decoder": st(decoders.Metaspace(prepend_scheme="never"))},
    "bert_pretokenizer": {"pre_tokenizer": st(pre_tokenizers.BertPreTokenizer())},
    "char_delimiter": {"pre_tokenizer": st(pre_tokenizers.CharDelimiterSplit("e"))},
    "byte_level_prefix": {"pre_tokenizer": st(pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)),
                          "decoder": st(decoders.ByteLevel())},
    "decoder_strip_replace": {"decoder": st(decoders.Sequence([decoders.Replace("</w>", " "), decoders.Fuse(),
                                                               decoders.Strip(" ", 0, 1)]))},
    "decoder_wordpiece": {"decoder": st(decoders.WordPiece(prefix="##", cleanup=True))},
    "template_pair": {"post_processor": st(processors.TemplateProcessing(
        single="<s> $A </s> </s>", pair="<s> $A </s> $B:1 </s>:1", special_tokens=[("<s>", 1), ("</s>", 2)]))},
    "roberta": {"post_processor": st(processors.RobertaProcessing(("</s>", 2), ("<s>", 1)))},
    "sequence_post": {"post_processor": st(processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                                                processors.TemplateProcessing(
                                                                    single="$A </s>", special_tokens=[("</s>", 2)])]))},
}


# The variants share one vocabulary, so fewer texts show each component (and keep the fixture small).
VARIANT_CASES = [CASES[i] for i in (2, 3, 5, 7, 8, 9, 11, 12, 15, 16, 17, 18, 23, 26, 31)] + [
    "ctrl\x01\x1f\x7f zero\u200bwidth\ufeffbom line\u2028sep \u2581meta"]


def cases_for(tok, texts=CASES):
    out = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        # BPEDecoder panics on no tokens (tokenizers 0.23.3); nothing decodes to "" anyway.
        decoded = tok.decode(ids, skip_special_tokens=False) if ids else ""
        out.append({"text": text, "ids": ids, "ids_with_special": tok.encode(text, add_special_tokens=True).ids,
                    "decoded": decoded})
    return out


def compact_lines(items):
    """A JSON list, one compact item a line: small to commit, readable in a diff."""
    lines = [json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items]
    return "[\n" + ",\n".join(lines) + "\n]\n"


def write_dir(name, spec, config=None):
    d = OUT / name
    d.mkdir(parents=True, exist_ok=True)
    text = json.dumps(spec, ensure_ascii=False, separators=(",", ":"))
    tok = Tokenizer.from_str(text)
    (d / "tokenizer.json").write_text(text + "\n")
    if config:
        (d / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    (d / "cases.json").write_text(compact_lines(cases_for(tok)))


def main():
    spm = spm_common(spm_added(with_byte_tokens(train_bpe(380, 50, ["<unk>", "<s>", "</s>"], byte_fallback=True),
                                                ["<unk>", "<s>", "</s>"])))
    write_dir("llama2_spm", llama2(spm), {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                                          "add_bos_token": True})
    write_dir("mistral_spm", mistral(spm), {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    write_dir("t5_unigram", t5_unigram(), {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"})
    write_dir("bert_wordpiece", bert_wordpiece(), {"unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]"})
    write_dir("qwen2_bytelevel", qwen2_bytelevel(), {"eos_token": "<|im_end|>"})
    base = variants_base()
    (OUT / "variants_base.json").write_text(json.dumps(base, ensure_ascii=False, separators=(",", ":")) + "\n")
    variants = []
    for name, override in VARIANTS.items():
        spec = dict(base, **override)
        tok = Tokenizer.from_str(json.dumps(spec))
        variants.append({"name": name, "override": override, "cases": cases_for(tok, VARIANT_CASES)})
    (OUT / "variants.json").write_text(compact_lines(variants))


if __name__ == "__main__":
    main()
