"""Concurrent streaming clients for bench/serve.sh: each of --clients threads sends --requests streamed chat
completions to a running `dew serve` and records when its first token came, how many it got and how it
ended. Prints one JSON line: completed, errors by status, lost (no answer and no error: must be 0),
completion tokens, wall time, aggregate tokens/s and time-to-first-token p50/p99.

Standard library only (http.client), so it runs with any python3.

    python3 bench/serve_clients.py --port PORT [--clients 64] [--requests 1] [--max-tokens 32] [--time-limit 600]
"""
import argparse
import http.client
import json
import threading
import time

TOPICS = ["the sea", "a lighthouse", "bread", "winter", "a clock", "the moon", "a library", "rain", "a garden",
          "trains", "a violin", "mountains", "a kite", "the desert", "owls", "a bridge"]


def one_request(port, index, max_tokens, deadline):
    """Returns (status, first_token_s, completion_tokens, error); status -1 = lost (no answer, no error)."""
    body = json.dumps({
        "messages": [{"role": "user", "content": f"Write a short story about {TOPICS[index % len(TOPICS)]}."}],
        "max_tokens": max_tokens, "temperature": 0, "stream": True, "ignore_eos": True,
        "stream_options": {"include_usage": True}})
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=max(1.0, deadline - time.time()))
    try:
        connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            payload = response.read().decode("utf-8", "replace")
            try:
                message = json.loads(payload)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = payload[:200]
            return response.status, None, 0, message
        first, tokens, done, finish = None, 0, False, None
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            event = json.loads(data)
            if "error" in event:
                return 500, first, tokens, event["error"]["message"]
            for choice in event.get("choices", []):
                if choice.get("delta", {}).get("content") and first is None:
                    first = time.perf_counter() - start
                finish = choice.get("finish_reason") or finish
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
        if not done or finish is None:
            return -1, first, tokens, "the stream ended without a finish_reason and [DONE]"
        return 200, first, tokens, None
    except (OSError, http.client.HTTPException) as e:
        return -1, None, 0, f"{type(e).__name__}: {e}"
    finally:
        connection.close()


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=1, help="requests per client, one after another")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--time-limit", type=float, default=600, help="seconds; requests not finished by then count as lost")
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    deadline = time.time() + args.time_limit
    results, lock = [], threading.Lock()

    def client(c):
        for r in range(args.requests):
            if time.time() >= deadline:
                break
            outcome = one_request(args.port, c * args.requests + r, args.max_tokens, deadline)
            with lock:
                results.append(outcome)

    start = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start

    errors, lost_reasons = {}, []
    for status, _, _, message in results:
        if status == -1:
            lost_reasons.append(message)
        elif status != 200:
            errors.setdefault(str(status), message)
    ttft = [r[1] for r in results if r[0] == 200 and r[1] is not None]
    tokens = sum(r[2] for r in results if r[0] == 200)
    print(json.dumps({
        "label": args.label, "clients": args.clients, "requests": args.clients * args.requests,
        "answered": len(results), "completed": sum(1 for r in results if r[0] == 200),
        "errors": {s: sum(1 for r in results if str(r[0]) == s) for s in errors}, "error_messages": errors,
        "lost": len(lost_reasons) + args.clients * args.requests - len(results), "lost_reasons": lost_reasons[:3],
        "completion_tokens": tokens, "wall_s": round(wall, 3), "tokens_per_s": round(tokens / wall, 2),
        "ttft_p50_s": percentile(ttft, 0.5), "ttft_p99_s": percentile(ttft, 0.99)}))


if __name__ == "__main__":
    main()
