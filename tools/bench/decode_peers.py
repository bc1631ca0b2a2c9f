"""Peers for bench/decode.sh: the same GGUF, prompt and greedy decoding as bench/decode_bench.cpp.

    python decode_peers.py transformers --model FILE.gguf [--new-tokens 128] [--threads 2] [--rounds 3]

transformers loads the GGUF itself (AutoModelForCausalLM.from_pretrained(dir, gguf_file=...), dequantized
to float32), eager PyTorch, and decodes with generate(do_sample=False). One round: generate 1 token
(prefill + one), then N; decode rate = (N - 1) / (t_N - t_1), prefill rate = prompt tokens / t_1; medians
over rounds after one warm-up. EOS is suppressed only by asking for exactly N new tokens (min_new_tokens),
as dew's benchmark ignores EOS. Prints one JSON line like decode_bench's.
"""
import argparse
import json
import os
import pathlib
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' dequantization progress bar


def main():
    p = argparse.ArgumentParser()
    p.add_argument("impl", choices=["transformers"])
    p.add_argument("--model", required=True)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompt", default="What is the capital of France?")
    a = p.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging
    logging.set_verbosity_error()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    path = pathlib.Path(a.model)
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    model.eval()
    load_s = time.perf_counter() - start
    tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    text = tok.apply_chat_template([{"role": "user", "content": a.prompt}], add_generation_prompt=True, tokenize=False)
    ids = torch.tensor([tok.encode(text, add_special_tokens=False)])

    def run(n):
        t = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                                 min_new_tokens=n, pad_token_id=tok.pad_token_id)
        s = time.perf_counter() - t
        assert out.shape[1] - ids.shape[1] == n
        return s

    run(a.new_tokens)
    prefill, decode = [], []
    for _ in range(a.rounds):
        t1, tn = run(1), run(a.new_tokens)
        prefill.append(ids.shape[1] / t1)
        decode.append((a.new_tokens - 1) / max(tn - t1, 1e-9))
    print(json.dumps({"impl": "transformers", "model": a.model, "threads": torch.get_num_threads(),
                      "prompt_tokens": ids.shape[1], "new_tokens": a.new_tokens, "load_s": load_s,
                      "prefill_tokens_per_s": statistics.median(prefill),
                      "decode_tokens_per_s": statistics.median(decode)}))


if __name__ == "__main__":
    main()
