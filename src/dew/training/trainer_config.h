#pragma once
// The `trainer.*` section of a run's config: how long, how big, how often, where.
#include <cstdint>
#include <string>

namespace dew::training {

struct TrainerConfig {
  std::int64_t steps = 1000;  // a total: a resumed run trains up to it
  std::int64_t batch_size = 16;  // rows per optimizer step (all micro-batches together)
  std::int64_t grad_accum = 1;   // micro-batches per step; batch_size must divide by it
  std::int64_t log_every = 10;
  std::int64_t eval_every = 200;    // 0 = only at the end (when there is validation data)
  std::int64_t eval_batches = 0;    // 0 = the whole validation split
  std::int64_t checkpoint_every = 500;  // 0 = only at the end
  std::int64_t keep_checkpoints = 3;    // 0 = keep all
  std::uint64_t seed = 0;
  double ema_decay = 0.99;  // 0 = no EMA copy
  bool ema_warmup = false;  // ramp the decay up from 0.1 (ema.h); image diffusion runs turn it on
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  double peak_flops = 0;       // the MFU denominator in FLOP/s; 0 = measure a matmul at start-up
  double flops_per_token = 0;  // the MFU numerator per token; 0 = 6 * parameters
  std::string parallel = "ddp";  // none | ddp | fsdp: how the processes `dew launch` starts share the work
  double timeout_seconds = 600;   // a collective (or the rendezvous) waiting longer than this fails
  std::int64_t trace_step = 0;    // 0 = off; else that step runs under LibTorch's profiler (RUN/trace/)

  template <class V>
  void fields(V& v) {
    v("steps", steps, "total optimizer steps (a resumed run trains up to this)");
    v("batch_size", batch_size, "rows per optimizer step, all micro-batches together");
    v("grad_accum", grad_accum, "micro-batches per step (batch_size / grad_accum rows each)");
    v("log_every", log_every, "log training scalars every N steps");
    v("eval_every", eval_every, "validate every N steps; 0 = only at the end");
    v("eval_batches", eval_batches, "validation batches per evaluation; 0 = the whole split");
    v("checkpoint_every", checkpoint_every, "write a checkpoint every N steps; 0 = only at the end");
    v("keep_checkpoints", keep_checkpoints, "keep the newest N checkpoints; 0 = all");
    v("seed", seed, "initialisation and RNG seed");
    v("ema_decay", ema_decay, "decay of the EMA copy of the weights (evaluation reads it); 0 = none");
    v("ema_warmup", ema_warmup, "ramp the EMA decay as min(ema_decay, (1 + n) / (10 + n)) after n steps, so a short run's average is not mostly its initial weights");
    v("device", device, "auto (cuda when present), cpu, cuda or cuda:N");
    v("peak_flops", peak_flops, "FLOP/s for MFU; 0 = measure a matmul at start-up");
    v("flops_per_token", flops_per_token, "training FLOPs per token for MFU; 0 = 6 * parameters");
    v("parallel", parallel, "with several processes (dew launch): ddp = data parallel, each process a shard of every "
      "batch, gradients summed over them; fsdp = the same with parameters, gradients, optimizer state and EMA sharded "
      "over the processes, each layer gathered for its call; none = refuse to run as several processes");
    v("timeout_seconds", timeout_seconds, "with several processes: a collective or the rendezvous waiting longer than "
      "this fails, naming the rank that stopped");
    v("trace_step", trace_step, "0 = off; N = run step N under LibTorch's profiler and write its ops as a Chrome "
      "trace to RUN/trace/step-N.json (open in chrome://tracing or Perfetto; tools/bench/trace_ops.py sums it per op)");
  }

  // Rows one process reads per micro-batch: batch_size / (grad_accum x the job's process count).
  std::int64_t process_rows() const;

  // Refuses non-positive sizes, a batch that grad_accum (times the process count) does not divide, a bad
  // device, naming trainer.*.
  void validate() const;
};

}  // namespace dew::training
