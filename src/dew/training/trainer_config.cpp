#include "dew/training/trainer_config.h"

#include <algorithm>

#include "dew/core/error.h"
#include "dew/distributed/process_place.h"

namespace dew::training {

std::int64_t TrainerConfig::process_rows() const {
  return batch_size / std::max<std::int64_t>(1, grad_accum) / distributed::process_place().world;
}

void TrainerConfig::validate() const {
  if (steps < 0) fail("trainer.steps must be >= 0, got ", steps);
  if (batch_size <= 0) fail("trainer.batch_size must be positive, got ", batch_size);
  if (grad_accum <= 0) fail("trainer.grad_accum must be positive, got ", grad_accum);
  if (batch_size % grad_accum != 0) {
    fail("trainer.batch_size (", batch_size, ") must be a multiple of trainer.grad_accum (", grad_accum, ")");
  }
  if (parallel != "none" && parallel != "ddp" && parallel != "fsdp") {
    fail("trainer.parallel must be none, ddp or fsdp, got \"", parallel, "\"");
  }
  if (!(timeout_seconds > 0)) fail("trainer.timeout_seconds must be positive, got ", timeout_seconds);
  const auto& place = distributed::process_place();
  if (place.multi_process()) {
    if (parallel == "none") {
      fail("this process is ", place.describe(), " of a multi-process job (WORLD_SIZE=", place.world,
           ") but trainer.parallel is none; set trainer.parallel=ddp, or run one process");
    }
    if (batch_size % (grad_accum * place.world) != 0) {
      fail("trainer.batch_size (", batch_size, ") must be a multiple of trainer.grad_accum (", grad_accum, ") x ", place.world,
           " processes: each process takes batch_size / (grad_accum x processes) rows per micro-batch; use a batch size of ",
           grad_accum * place.world * ((batch_size + grad_accum * place.world - 1) / (grad_accum * place.world)));
    }
  }
  if (log_every <= 0) fail("trainer.log_every must be positive, got ", log_every);
  if (eval_every < 0) fail("trainer.eval_every must be >= 0 (0 = only at the end), got ", eval_every);
  if (eval_batches < 0) fail("trainer.eval_batches must be >= 0 (0 = the whole split), got ", eval_batches);
  if (checkpoint_every < 0) fail("trainer.checkpoint_every must be >= 0 (0 = only at the end), got ", checkpoint_every);
  if (trace_step < 0) fail("trainer.trace_step must be >= 0 (0 = off), got ", trace_step);
  if (keep_checkpoints < 0) fail("trainer.keep_checkpoints must be >= 0 (0 = all), got ", keep_checkpoints);
  if (!(ema_decay >= 0 && ema_decay < 1)) fail("trainer.ema_decay must be in [0, 1) (0 = none), got ", ema_decay);
  if (!(peak_flops >= 0)) fail("trainer.peak_flops must be >= 0 (0 = measure), got ", peak_flops);
  if (!(flops_per_token >= 0)) fail("trainer.flops_per_token must be >= 0 (0 = 6 * parameters), got ", flops_per_token);
}

}  // namespace dew::training
