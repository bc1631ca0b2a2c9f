"""Self time per op name from a Chrome trace (train_lm_bench --phases --trace FILE), largest first.

    python trace_ops.py TRACE.json [TOP=30]

An event's self time is its duration less the durations of the events nested directly inside it on the
same thread, as torch.profiler's "Self CPU" column counts it.
"""

import json
import sys
from collections import defaultdict


def main(path: str, top: int) -> None:
    events = [e for e in json.load(open(path)) if e.get("ph") == "X"]
    by_thread = defaultdict(list)
    for e in events:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    self_time, calls = defaultdict(float), defaultdict(int)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, children duration]
        for e in evs:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                done, child = stack.pop()
                self_time[done["name"]] += done["dur"] - child
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0.0])
            calls[e["name"]] += 1
        for done, child in stack:
            self_time[done["name"]] += done["dur"] - child
    total = sum(self_time.values())
    print(f"{'op':<60}{'self ms':>10}{'%':>7}{'calls':>7}")
    for name, t in sorted(self_time.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{name[:59]:<60}{t / 1e3:>10.2f}{100 * t / total:>6.1f}%{calls[name]:>7}")
    print(f"{'total':<60}{total / 1e3:>10.2f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30)
