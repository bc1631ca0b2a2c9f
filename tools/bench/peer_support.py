"""What the benchmark peers (tools/bench/*_peers.py) measure and set up the same way."""

from __future__ import annotations

import os
import resource
import sys


def current_rss_mib() -> float:
    """Resident memory now, in MiB: the baseline before a peer allocates."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib(who=resource.RUSAGE_SELF) -> float:
    """Peak resident memory of this process (or RUSAGE_CHILDREN: of its waited-for children), in MiB."""
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


def limit_jax_threads(threads: int) -> None:
    """XLA's CPU client sizes its pools from the CPUs this process may run on; pin it before importing jax."""
    if threads > 0:
        cpus = sorted(os.sched_getaffinity(0))[:threads]
        os.sched_setaffinity(0, cpus)
        if threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                       " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()


def probe_dewml(*modules: str) -> str | None:
    """None when dewml (import name `dew`) and the given submodules import here; else why not."""
    if sys.version_info < (3, 12):
        return f"dewml 0.1.0 requires Python >= 3.12, this is {sys.version.split()[0]}"
    try:
        import importlib
        for module in ("dew", *modules):
            importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - the reason is the report
        return f"import failed: {type(e).__name__}: {e}"
    return None


class DewmlStepClock:
    """A dewml Trainer tracker that keeps each step's reported step_time_ms (with its step) and loss, and the
    wall time between consecutive per-step log calls."""

    def __init__(self):
        import time
        self._now = time.perf_counter
        self.last = None
        self.gaps, self.reported, self.losses = [], [], []

    def log(self, scalars, step):
        now = self._now()
        if "train/step_time_ms" in scalars:
            if self.last is not None:
                self.gaps.append((int(step), now - self.last))
            self.last = now
            self.reported.append((int(step), float(scalars["train/step_time_ms"]) / 1000))
        for key in ("train/loss", "loss", "train/ce"):
            if key in scalars:
                self.losses.append(float(scalars[key]))
                break

    def artifact(self, value, step):
        pass

    def close(self):
        pass


def time_dewml_trainer(objective, optim, rows, batch: int, steps: int, warmup: int, seed: int) -> dict:
    """Runs dewml's Trainer for warmup + steps steps over `rows` (a list of batches, cycled) and returns what
    every peer reports of it: the median step time its tracker reported after the warmup steps (step_s), the
    fastest, all of them, the median wall time between per-step log calls, and the first and last loss."""
    import itertools
    import statistics

    import jax
    from dew import Dataset, Trainer

    data = Dataset(train=lambda partition: itertools.cycle(rows), val=None, records=batch * len(rows), batch=batch)
    clock = DewmlStepClock()
    trainer = Trainer(objective, optim, key=jax.random.key(seed), tracker=clock)
    trainer.fit(data, steps=warmup + steps, log_every=1, checkpoint_every=None)
    measured = [s for step, s in clock.reported if step > warmup]
    gaps = [g for s, g in clock.gaps if s > warmup]
    return {"jax": jax.__version__, "steps_measured": len(measured), "step_s": statistics.median(measured),
            "step_s_min": min(measured), "steps_s": measured,
            "step_s_between_logs": statistics.median(gaps) if gaps else None,
            "loss_first": clock.losses[0] if clock.losses else None,
            "loss_last": clock.losses[-1] if clock.losses else None}
