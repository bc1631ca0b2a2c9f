"""Runs for bench/post_training.sh: SFT, DPO and GRPO with LoRA on one model, dew against TRL.

    python post_training_peers.py data DIR                      # writes DIR/{chat,pairs,prompts}.jsonl
    python post_training_peers.py dew  sft|dpo|grpo --bin DEW --model HF_DIR --data DIR [flags]
    python post_training_peers.py trl  sft|dpo|grpo --model HF_DIR --data DIR [flags]
    python post_training_peers.py report RESULTS.jsonl           # the table, from the JSON lines above

Each run prints one JSON line: the median step time over the measured steps (after --warmup steps), tokens/s
from it, and the peak RSS of the process that trained (dew: the child process, read with RUSAGE_CHILDREN;
TRL: this process). Run each in its own process, so each peak is its own.

The work is made equal on both sides (the bench's settings, documented in docs/benchmarks.md):
- LoRA rank 16, alpha 32, dropout 0 on q,k,v,o,gate,up,down; AdamW, constant learning rate, grad clip 1.0, fp32.
- TRL otherwise keeps its defaults, gradient checkpointing included (its SFT, DPO and GRPO configs all default
  gradient_checkpointing=True: less activation memory, a recomputed forward); dew keeps its activations.
- SFT: rows of --seq tokens, --batch rows; loss on every token on both sides (dew lm.loss_role=-1, TRL's default
  for conversational data without assistant_only_loss). dew packs whole conversations into rows (padding at the
  end, no attention across conversations); TRL packs with packing_strategy="wrapped" (rows exactly --seq tokens,
  no padding-free flattening), so both forward exactly batch x seq tokens per step. Tokens/s = batch x seq /
  step time on both sides; dew's own tokens_per_second counts loss targets only, so it is not used.
- DPO: sigmoid loss, beta 0.1, --batch pairs; the reference is the frozen initial model (TRL with a peft_config:
  the policy with its adapters disabled; dew: a second copy of the weights). Every pair has the same token
  count (two-digit sums, see make_data), so tokens/s = batch x (prompt+chosen + prompt+rejected) / step time.
- GRPO: --batch prompts x --group completions, max_new_tokens, temperature 1, beta 0.04, one optimisation pass
  per rollout (dew grpo.epochs=1, TRL num_iterations=1), token-level loss (TRL loss_type="bnpo"), reward
  last_number (dew's built-in; the same rule in Python below for TRL), generation with transformers'
  generate for TRL (use_vllm=False). A step = rollout + scoring + update; the mean completion length is
  reported beside it because sampled lengths set the work.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from peer_support import peak_rss_mib

LORA_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


# ----------------------------------------------------------------------------------------------------
# Data: arithmetic with two-digit operands and two-digit sums, so every pair and prompt has the same length
# ----------------------------------------------------------------------------------------------------

def make_data(out: str, lines: int = 400, seed: int = 0) -> None:
    r = random.Random(seed)
    os.makedirs(out, exist_ok=True)

    def question():
        a, b = r.randint(10, 44), r.randint(10, 44)  # sums 20..88: a wrong sum +-1 stays two digits
        return a, b, f"What is {a} + {b}?"

    with open(os.path.join(out, "chat.jsonl"), "w") as f:
        for _ in range(lines):
            messages = []
            for _ in range(r.randint(1, 3)):
                a, b, q = question()
                messages += [{"role": "user", "content": q}, {"role": "assistant", "content": f"{a} + {b} = {a + b}."}]
            f.write(json.dumps({"messages": messages}) + "\n")
    with open(os.path.join(out, "pairs.jsonl"), "w") as f:
        for _ in range(lines):
            a, b, q = question()
            wrong = a + b + r.choice((-1, 1))
            f.write(json.dumps({"prompt": [{"role": "user", "content": q}],
                                "chosen": [{"role": "assistant", "content": f"{a} + {b} = {a + b}."}],
                                "rejected": [{"role": "assistant", "content": f"{a} + {b} = {wrong}."}]}) + "\n")
    with open(os.path.join(out, "prompts.jsonl"), "w") as f:
        for _ in range(lines):
            a, b, q = question()
            f.write(json.dumps({"prompt": [{"role": "user", "content": q + " Answer with the number."}],
                                "ground_truth": str(a + b)}) + "\n")


def pair_tokens(model: str, data: str) -> int:
    """prompt+chosen + prompt+rejected ids of the first pair, with the model's chat template (all pairs are equal)."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model)
    row = json.loads(open(os.path.join(data, "pairs.jsonl")).readline())
    n = 0
    for side in ("chosen", "rejected"):
        n += len(tok.apply_chat_template(row["prompt"] + row[side], tokenize=True, return_dict=False))
    return n


# ----------------------------------------------------------------------------------------------------
# dew: the CLI in a child process; step times from RUN/tracking/scalars.jsonl
# ----------------------------------------------------------------------------------------------------

def run_dew(a) -> dict:
    total = a.warmup + a.steps
    sets = {"lora.rank": 16, "lora.alpha": 32, "lora.dropout": 0, "lora.modules": ",".join(LORA_MODULES),
            "trainer.steps": total, "trainer.log_every": 1, "trainer.checkpoint_every": 0,
            "trainer.peak_flops": 1,  # skip the start-up matmul probe (MFU is not used here)
            "data.val_fraction": 0, "optim.schedule": "constant", "optim.learning_rate": 1e-4,
            "optim.weight_decay": 0, "optim.grad_clip_norm": 1.0, "trainer.device": "cpu",
            # bf16: compute in bfloat16 with fp32 parameters (LoRA's adapters and AdamW state stay fp32)
            "model.dtype": "bfloat16" if a.precision == "bf16" else "float32"}
    extra = []
    if a.kind == "sft":
        data = os.path.join(a.data, "chat.jsonl")
        sets.update({"data.seq_len": a.seq, "trainer.batch_size": a.batch, "lm.loss_role": -1})
    elif a.kind == "dpo":
        data = os.path.join(a.data, "pairs.jsonl")
        sets.update({"data.seq_len": a.seq, "trainer.batch_size": a.batch, "dpo.beta": 0.1, "dpo.loss": "sigmoid"})
    else:
        data = os.path.join(a.data, "prompts.jsonl")
        sets.update({"trainer.batch_size": a.batch, "grpo.group_size": a.group, "grpo.max_new_tokens": a.new_tokens,
                     "grpo.temperature": 1.0, "grpo.beta": 0.04, "grpo.epochs": 1})
        extra = ["--reward", "last_number"]
    with tempfile.TemporaryDirectory(prefix="dew-post-") as tmp:
        run = os.path.join(tmp, "run")
        cmd = [a.bin, "train", a.kind, "--data", data, "--init-from", a.model, "--out", run, *extra]
        for k, v in sets.items():
            cmd += ["--set", f"{k}={v}"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            raise SystemExit(f"dew train {a.kind} failed (exit {proc.returncode})")
        lines = [json.loads(l) for l in open(os.path.join(run, "tracking", "scalars.jsonl"))]
    rows = [l["scalars"] for l in lines if "step_seconds" in l["scalars"]]
    measured = [r["step_seconds"] for r in rows[a.warmup:]]
    out = {"impl": "dew", "kind": a.kind, "steps_measured": len(measured), "step_s": statistics.median(measured),
           "step_s_min": min(measured), "steps_s": measured, "wall_s": wall, "loss_first": rows[0].get("loss"),
           "loss_last": rows[-1].get("loss"), "losses": [r.get("loss") for r in rows],
           "peak_rss_mib": peak_rss_mib(resource.RUSAGE_CHILDREN)}
    if a.kind == "grpo":
        out["completion_length"] = statistics.mean(r["completion_length"] for r in rows[a.warmup:])
        out["reward_mean"] = statistics.mean(r["reward/mean"] for r in rows)
    return out


# ----------------------------------------------------------------------------------------------------
# TRL
# ----------------------------------------------------------------------------------------------------

def last_number_reward(completions, ground_truth, **_):
    """dew's last_number, enough of it for these sums: 1 when the completion's last number equals ground_truth's."""
    def last(text):
        found = re.findall(r"(?<![A-Za-z0-9])-?\d[\d,]*(?:\.\d+)?|\d+(?:\.\d+)?", text)
        return float(found[-1].replace(",", "")) if found else None
    scores = []
    for c, g in zip(completions, ground_truth):
        text = c[0]["content"] if isinstance(c, list) else c
        got = last(text)
        scores.append(1.0 if got is not None and got == last(g) else 0.0)
    return scores


def run_trl(a) -> dict:
    import torch
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    class StepClock(TrainerCallback):
        """Wall time of each optimizer step: TRL's whole step (GRPO: generation, scoring and update)."""

        def __init__(self):
            self.times, self.logs, self.t = [], [], None

        def on_step_begin(self, args, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            self.times.append(time.perf_counter() - self.t)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs:
                self.logs.append(dict(logs))

    total = a.warmup + a.steps
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32, attn_implementation="sdpa")
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=LORA_MODULES, task_type="CAUSAL_LM")
    common = dict(output_dir=tempfile.mkdtemp(prefix="trl-post-"), max_steps=total, logging_steps=1,
                  save_strategy="no", report_to=[], learning_rate=1e-4, lr_scheduler_type="constant",
                  weight_decay=0.0, max_grad_norm=1.0, optim="adamw_torch", use_cpu=True, fp16=False,
                  bf16=a.precision == "bf16",  # on the CPU: torch.autocast("cpu", torch.bfloat16) via accelerate
                  dataloader_num_workers=0, seed=0, disable_tqdm=True)
    clock = StepClock()
    if a.kind == "sft":
        from trl import SFTConfig, SFTTrainer
        ds = load_dataset("json", data_files=os.path.join(a.data, "chat.jsonl"), split="train")
        cfg = SFTConfig(per_device_train_batch_size=a.batch, max_length=a.seq, packing=True,
                        packing_strategy="wrapped", padding_free=False, assistant_only_loss=False, **common)
        trainer = SFTTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok, peft_config=lora,
                             callbacks=[clock])
    elif a.kind == "dpo":
        from trl import DPOConfig, DPOTrainer
        ds = load_dataset("json", data_files=os.path.join(a.data, "pairs.jsonl"), split="train")
        cfg = DPOConfig(per_device_train_batch_size=a.batch, max_length=a.seq, beta=0.1, loss_type=["sigmoid"],
                        **common)
        trainer = DPOTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok, peft_config=lora,
                             callbacks=[clock])
    else:
        from trl import GRPOConfig, GRPOTrainer
        ds = load_dataset("json", data_files=os.path.join(a.data, "prompts.jsonl"), split="train")
        cfg = GRPOConfig(per_device_train_batch_size=a.batch * a.group, num_generations=a.group,
                         max_completion_length=a.new_tokens, temperature=1.0, beta=0.04, num_iterations=1,
                         loss_type="bnpo", use_vllm=False, **common)
        trainer = GRPOTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok, peft_config=lora,
                              reward_funcs=[last_number_reward], callbacks=[clock])
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    measured = clock.times[a.warmup:]
    losses = [l["loss"] for l in clock.logs if "loss" in l]
    out = {"impl": "trl", "kind": a.kind, "threads": torch.get_num_threads(), "steps_measured": len(measured),
           "step_s": statistics.median(measured), "step_s_min": min(measured), "steps_s": measured, "wall_s": wall,
           "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None, "losses": losses,
           "peak_rss_mib": peak_rss_mib()}
    if a.kind == "sft":
        batch = next(iter(trainer.get_train_dataloader()))
        out["row_shape"] = list(batch["input_ids"].shape)  # the wrapped rows: [batch, seq]
    if a.kind == "grpo":
        lengths = [l["completions/mean_length"] for l in clock.logs if "completions/mean_length" in l]
        out["completion_length"] = statistics.mean(lengths[a.warmup:] or lengths)
        out["reward_mean"] = statistics.mean(l["reward"] for l in clock.logs if "reward" in l)
    return out


# ----------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------

def report(path: str, pair_ids: int) -> None:
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]

    def med(impl, kind, key):
        v = [r[key] for r in rows if r["impl"] == impl and r["kind"] == kind and r.get(key) is not None]
        return statistics.median(v) if v else None

    first = {k: next((r for r in rows if r["kind"] == k), None) for k in ("sft", "dpo", "grpo")}
    busy = [r for r in rows if r.get("busy_before", 0) >= 10]
    print(f"\n{len(rows)} runs, {len(busy)} started on a busy machine (>= 10% busy after the idle wait); "
          f"load average now {os.getloadavg()[0]:.1f}")
    print(f"{'bench':<6}{'impl':<6}{'runs':>5}{'step s':>9}{'best s':>9}{'tokens/s':>10}{'peak RSS MiB':>14}"
          f"{'loss 1st->last':>17}{'compl. len':>12}")
    ratios = {}
    for kind, r0 in first.items():
        if r0 is None:
            continue
        for impl in ("dew", "trl"):
            step = med(impl, kind, "step_s")
            if step is None:
                continue
            n = len([r for r in rows if r["impl"] == impl and r["kind"] == kind])
            best = min(r["step_s_min"] for r in rows if r["impl"] == impl and r["kind"] == kind)
            tokens = {"sft": r0["batch"] * r0["seq"], "dpo": r0["batch"] * pair_ids}.get(kind)
            tps = f"{tokens / step:>10.0f}" if tokens else f"{'-':>10}"
            lf, ll = med(impl, kind, "loss_first"), med(impl, kind, "loss_last")
            loss = f"{lf:.3f}->{ll:.3f}" if lf is not None and ll is not None else "-"
            cl = med(impl, kind, "completion_length")
            print(f"{kind:<6}{impl:<6}{n:>5}{step:>9.2f}{best:>9.2f}{tps}{med(impl, kind, 'peak_rss_mib'):>14.0f}"
                  f"{loss:>17}{(f'{cl:.1f}' if cl is not None else '-'):>12}")
        d, t = med("dew", kind, "step_s"), med("trl", kind, "step_s")
        if d and t:
            ratios[kind] = (t / d, med("dew", kind, "peak_rss_mib") / med("trl", kind, "peak_rss_mib"))
    print()
    for kind, (speed, mem) in ratios.items():
        goal = "step >= 2x faster" if kind == "grpo" else "tokens/s >= 2x"
        print(f"{kind}: dew/TRL speed {speed:.2f}x ({goal}: {'met' if speed >= 2 else 'not met'}), "
              f"peak RSS {mem:.2f}x (<= 0.6x: {'met' if mem <= 0.6 else 'not met'})")


def main(argv) -> int:
    if argv and argv[0] == "data":
        make_data(argv[1])
        return 0
    if argv and argv[0] == "pair-tokens":
        print(pair_tokens(argv[1], argv[2]))
        return 0
    if argv and argv[0] == "report":
        report(argv[1], int(argv[2]))
        return 0
    p = argparse.ArgumentParser()
    p.add_argument("impl", choices=["dew", "trl"])
    p.add_argument("kind", choices=["sft", "dpo", "grpo"])
    p.add_argument("--bin", default="build/bin/dew")
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--batch", type=int, default=0, help="sft rows (8), dpo pairs (4), grpo prompts (4)")
    p.add_argument("--seq", type=int, default=256, help="sft row length; dpo max length")
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="fp32 on both sides, or bf16 compute with fp32 parameters (dew model.dtype, TRL bf16=True)")
    a = p.parse_args(argv)
    a.batch = a.batch or {"sft": 8, "dpo": 4, "grpo": 4}[a.kind]
    out = run_dew(a) if a.impl == "dew" else run_trl(a)
    out.update({"batch": a.batch, "seq": a.seq, "group": a.group, "new_tokens": a.new_tokens, "warmup": a.warmup,
                "precision": a.precision})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
