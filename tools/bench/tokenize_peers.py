"""Peer side of the tokenization benchmark: tiktoken and Hugging Face tokenizers on the same text.

Both are built offline from GPT-2's files in the repository (assets/tokenizers/gpt2 and
/work/shared/data/gpt2-style encoder.json + vocab.bpe), so no hub is contacted. Prints one JSON line per
(implementation, mode) with the median MB/s over the repeats, like bench/tokenize_bench.cpp.

    python3 tools/bench/tokenize_peers.py FILE TOKENIZER_JSON [REPEATS]
"""
import json
import os
import statistics
import sys
import time


def median_seconds(repeats, run):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tiktoken_from_tokenizer_json(path):
    """GPT-2's encoding rebuilt from a Hugging Face tokenizer.json (same vocabulary and ranks)."""
    import tiktoken

    spec = json.load(open(path, encoding="utf-8"))
    # GPT-2's byte <-> printable-unicode table, inverted to turn vocab strings back into raw bytes.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    unicode_to_byte = {chr(c): b for b, c in zip(bs, cs)}
    ranks = {bytes(unicode_to_byte[ch] for ch in token): rank for token, rank in spec["model"]["vocab"].items()}
    specials = {t["content"]: t["id"] for t in spec.get("added_tokens", []) if t["content"] not in spec["model"]["vocab"]}
    return tiktoken.Encoding(
        name="gpt2-offline",
        pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        mergeable_ranks=ranks,
        special_tokens=specials or {"<|endoftext|>": 50256},
    )


def paragraphs(text):
    """Splits text after each blank line; the pieces concatenate back to the text exactly."""
    out, start = [], 0
    while start < len(text):
        cut = text.find("\n\n", start)
        cut = len(text) if cut < 0 else cut + 2
        out.append(text[start:cut])
        start = cut
    return out


def main():
    path, tokenizer_json = sys.argv[1], sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    text = open(path, encoding="utf-8").read()
    mb = len(text.encode("utf-8")) / 1e6
    threads = len(os.sched_getaffinity(0))
    # The batch (all threads) modes get paragraphs: many short documents are both peers' best case
    # (Hugging Face tokenizers is far slower on one long string than on many short ones).
    chunks = paragraphs(text)

    enc = tiktoken_from_tokenizer_json(tokenizer_json)
    n = len(enc.encode_ordinary(text))
    t = median_seconds(repeats, lambda: enc.encode_ordinary(text))
    print(json.dumps({"impl": "tiktoken", "mode": "1 thread", "threads": 1, "mb_per_s": round(mb / t, 2), "tokens": n}))
    t = median_seconds(repeats, lambda: enc.encode_ordinary_batch(chunks, num_threads=threads))
    print(json.dumps({"impl": "tiktoken", "mode": "all threads", "threads": threads, "mb_per_s": round(mb / t, 2),
                      "tokens": sum(map(len, enc.encode_ordinary_batch(chunks, num_threads=threads)))}))

    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_json)
    n = len(tok.encode(text).ids)
    t = median_seconds(repeats, lambda: tok.encode(text))
    print(json.dumps({"impl": "tokenizers", "mode": "1 thread", "threads": 1, "mb_per_s": round(mb / t, 2), "tokens": n}))
    t = median_seconds(repeats, lambda: tok.encode_batch(chunks))
    print(json.dumps({"impl": "tokenizers", "mode": "all threads", "threads": threads, "mb_per_s": round(mb / t, 2),
                      "tokens": sum(len(e.ids) for e in tok.encode_batch(chunks))}))


if __name__ == "__main__":
    main()
