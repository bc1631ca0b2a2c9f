"""Peer side of the SentencePiece rows of bench/tokenize.sh: the `sentencepiece` package and Hugging Face
tokenizers on the same text, with Llama 2's 32,000-piece vocabulary.

The vocabulary is llama.cpp's ggml-vocab-llama-spm.gguf (scripts/setup.sh unpacks it): its pieces, scores and
types become a SentencePiece ModelProto here (BPE, byte fallback, a dummy prefix, whitespace as U+2581, no
normalization rules: what llama.cpp and Llama 2's tokenizer.model do), so no model is downloaded. Hugging Face
tokenizers reads transformers' tokenizer.json conversion of the same file (tools/reference/
convert_llama_vocabs.py) when it is given. Prints one JSON line per (implementation, mode), median MB/s.

    python3 tools/bench/tokenize_spm_peers.py FILE GGUF [TOKENIZER_JSON] [REPEATS]
"""
import json
import os
import sys
import time

# The timing and paragraph cut of the GPT-2 rows, so both tables measure the same way.
from tokenize_peers import median_seconds, paragraphs


def sentencepiece_from_gguf(path):
    import gguf
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    reader = gguf.GGUFReader(path)
    field = lambda key: reader.fields[key].contents()
    proto = model_pb2.ModelProto()
    for piece, score, kind in zip(field("tokenizer.ggml.tokens"), field("tokenizer.ggml.scores"),
                                  field("tokenizer.ggml.token_type")):
        proto.pieces.add(piece=piece, score=float(score), type=int(kind))
    proto.trainer_spec.model_type = model_pb2.TrainerSpec.BPE
    proto.trainer_spec.vocab_size = len(proto.pieces)
    proto.trainer_spec.byte_fallback = True
    proto.trainer_spec.unk_id, proto.trainer_spec.bos_id, proto.trainer_spec.eos_id = 0, 1, 2
    proto.trainer_spec.pad_id = -1
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = True
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    return sentencepiece.SentencePieceProcessor(model_proto=proto.SerializeToString())


def main():
    path, gguf_path = sys.argv[1], sys.argv[2]
    tokenizer_json = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    text = open(path, encoding="utf-8").read()
    mb = len(text.encode("utf-8")) / 1e6
    threads = len(os.sched_getaffinity(0))
    chunks = paragraphs(text)

    sp = sentencepiece_from_gguf(gguf_path)
    n = len(sp.encode(text))
    t = median_seconds(repeats, lambda: sp.encode(text))
    print(json.dumps({"impl": "sentencepiece", "mode": "1 thread", "threads": 1, "mb_per_s": round(mb / t, 2), "tokens": n}))
    # One long string is sentencepiece's slow case; paragraphs on one thread are its usual one.
    t = median_seconds(repeats, lambda: sp.encode(chunks, num_threads=1))
    print(json.dumps({"impl": "sentencepiece", "mode": "1 thread (paragraphs)", "threads": 1, "mb_per_s": round(mb / t, 2),
                      "tokens": sum(map(len, sp.encode(chunks, num_threads=1)))}))
    t = median_seconds(repeats, lambda: sp.encode(chunks, num_threads=threads))
    print(json.dumps({"impl": "sentencepiece", "mode": "all threads", "threads": threads, "mb_per_s": round(mb / t, 2),
                      "tokens": sum(map(len, sp.encode(chunks, num_threads=threads)))}))
    if tokenizer_json:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(tokenizer_json)
        # One long string costs Hugging Face minutes (Metaspace(split=false) makes it one word): time one pass.
        start = time.perf_counter()
        n = len(tok.encode(text, add_special_tokens=False).ids)
        t = time.perf_counter() - start
        print(json.dumps({"impl": "tokenizers", "mode": "1 thread", "threads": 1, "mb_per_s": round(mb / t, 2), "tokens": n}))
        t = median_seconds(repeats, lambda: tok.encode_batch(chunks, add_special_tokens=False))
        print(json.dumps({"impl": "tokenizers", "mode": "all threads", "threads": threads, "mb_per_s": round(mb / t, 2),
                          "tokens": sum(len(e.ids) for e in tok.encode_batch(chunks, add_special_tokens=False))}))


if __name__ == "__main__":
    main()
