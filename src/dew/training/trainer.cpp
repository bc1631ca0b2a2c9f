#include "dew/training/trainer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/core/process_clock.h"
#include "dew/core/progress.h"
#include "dew/nn/device.h"
#include "dew/nn/parameters.h"
#include "dew/telemetry/local_tracker.h"
#include "dew/telemetry/plot.h"
#include "dew/training/checkpoint.h"
#include "dew/training/evaluate.h"
#include "dew/training/flops.h"
#include "dew/training/grad_clip.h"
#include "dew/training/lr_schedule.h"
#include "dew/training/process_statistics.h"
#include "dew/training/sharded_checkpoint.h"
#include "dew/training/step_trace.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace dew::training {
namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string to_hex(const at::Tensor& bytes) {
  auto b = bytes.contiguous();
  static const char* digits = "0123456789abcdef";
  std::string out;
  const auto* p = b.data_ptr<std::uint8_t>();
  for (std::int64_t i = 0; i < b.numel(); ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

at::Tensor from_hex(const std::string& hex, const std::string& source) {
  if (hex.size() % 2 != 0) fail("'", source, "' field 'rng_state' is not hex");
  auto out = at::empty({static_cast<std::int64_t>(hex.size() / 2)}, at::kByte);
  auto* p = out.data_ptr<std::uint8_t>();
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    fail("'", source, "' field 'rng_state' is not hex");
  };
  for (std::size_t i = 0; i < hex.size() / 2; ++i) p[i] = static_cast<std::uint8_t>(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  return out;
}

std::string format_value(const std::string& name, double v) {
  char buf[64];
  if (name == "lr") {
    std::snprintf(buf, sizeof buf, "%.2e", v);
  } else if (name == "mfu") {
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
  } else if (name == "step_seconds") {
    std::snprintf(buf, sizeof buf, "%.1f ms", 1000 * v);
  } else if (name == "tokens_per_second") {
    return human_count(v, "tok/s");
  } else if (name == "images_per_second") {
    return human_count(v, "img/s");
  } else if (name == "pairs_per_second") {
    return human_count(v, "pairs/s");
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

// The trainer's own scalars, in the order they are printed after the objective's.
// The rate is the objective's loss count per second (Objective::count_unit(): tokens, images), as
// "<unit>_per_second".
constexpr const char* kTrainerScalars[] = {"lr", "grad_norm", "step_seconds", "tokens_per_second", "images_per_second",
                                           "pairs_per_second", "mfu"};

bool is_trainer_scalar(const std::string& name) {
  return std::find(std::begin(kTrainerScalars), std::end(kTrainerScalars), name) != std::end(kTrainerScalars);
}

// "step 25/600  loss ...", then whatever the objective reports (its names, alphabetically), the trainer's
// scalars, and the validation metrics: nothing here knows which objective is training.
std::string log_line(std::int64_t step, std::int64_t total, const std::map<std::string, double>& scalars) {
  std::string line = dew::str("step ", step, "/", total);
  auto add = [&](const std::string& name, double v) { line += dew::str("  ", name, " ", format_value(name, v)); };
  if (auto it = scalars.find("loss"); it != scalars.end()) add("loss", it->second);
  for (const auto& [name, v] : scalars) {
    if (name != "loss" && !is_trainer_scalar(name) && name.rfind("val/", 0) != 0) add(name, v);
  }
  for (const char* name : kTrainerScalars) {
    if (auto it = scalars.find(name); it != scalars.end()) add(name, it->second);
  }
  for (const auto& [name, v] : scalars) {
    if (name.rfind("val/", 0) == 0) add(name, v);
  }
  return line;
}

}  // namespace


struct Trainer::StepOutcome {
  double loss_sum = 0, count = 0, grad_norm = 0, lr = 0, seconds = 0;
  objectives::Statistics metrics;
  bool stop = false;  // with several processes: some rank was asked to stop (summed with the step)
};

Trainer::Trainer(objectives::Objective& objective, OptimConfig optim, TrainerConfig config, fs::path run_dir)
    : objective_(objective), optim_(std::move(optim)), config_(std::move(config)), run_dir_(std::move(run_dir)),
      device_(c10::kCPU) {
  optim_.validate();
  config_.validate();
  device_ = nn::resolve_device(config_.device);
  if (distributed::process_place().multi_process()) {
    group_ = &distributed::join_process_group(
        device_, std::chrono::milliseconds(static_cast<std::int64_t>(config_.timeout_seconds * 1000)));
  }
}

Trainer::~Trainer() = default;

Trainer::StepOutcome Trainer::train_step(data::BatchSource& train, std::int64_t step, const GracefulStop& stop) {
  const auto start = Clock::now();
  StepOutcome out;
  std::vector<at::Tensor> params;
  for (auto& [name, p] : params_) {
    if (!buckets_) p.mutable_grad() = at::Tensor();
    params.push_back(p);
  }
  if (buckets_) buckets_->zero_gradients();
  if (sharded_) sharded_->gather_root(dew::str("the root's weights at step ", step + 1));
  const std::int64_t rows = config_.process_rows();
  at::Tensor loss_total;
  for (std::int64_t micro = 0; micro < config_.grad_accum; ++micro) {
    auto loss = objective_.loss(to_device(train.next_batch(rows), device_), step);
    if (buckets_ && micro + 1 == config_.grad_accum) buckets_->arm(dew::str("the gradient sum of step ", step + 1));
    loss.sum.backward();
    if (sharded_) sharded_->reduce_root_gradients(dew::str("the root's gradients at step ", step + 1));
    loss_total = loss_total.defined() ? loss_total + loss.sum.detach() : loss.sum.detach();
    out.count += loss.count;
    out.metrics.merge(loss.metrics);
  }
  if (sharded_) sharded_->release_root();
  out.loss_sum = loss_total.item<double>();
  if (group_) {
    const bool stop_requested = stop.requested();
    if (buckets_) buckets_->finish();
    // One small sum for the step's loss, count, stop requests and metrics: every rank then sees the same.
    objectives::Statistics local = out.metrics;
    local.add("\x01step", out.loss_sum, out.count);
    local.add("\x01stop", stop_requested ? 1 : 0, 0);
    auto total = sum_over_processes(local, *group_, dew::str("the loss sum of step ", step + 1));
    const auto& values = total.values();
    out.loss_sum = values.at("\x01step").sum;
    out.count = values.at("\x01step").count;
    out.stop = values.at("\x01stop").sum > 0;
    out.metrics = {};
    for (const auto& [name, v] : values) {
      if (name[0] != '\x01') out.metrics.add(name, v.sum, v.count);
    }
  }
  if (!std::isfinite(out.loss_sum)) {
    auto last = latest_checkpoint(run_dir_);
    fail("non-finite loss (", out.loss_sum, ") at step ", step + 1, "; training stopped without saving this state. ",
         last ? dew::str("The last good checkpoint is '", last->string(), "'.") : std::string("No checkpoint was written yet."),
         " Lower optim.learning_rate or check the data.");
  }
  if (out.count <= 0) fail("step ", step + 1, ": the batch has no loss terms (count 0); is every target masked out?");
  // The gradients hold sums over the step's count (tokens, images, pairs): the mean's gradient is theirs
  // divided by it. That division and the clipping are one factor the optimizer applies in its own pass.
  const GradientScale scale =
      sharded_ ? gradient_scale(params, optim_.grad_clip_norm, 1.0 / out.count, [this](double s) { return sharded_->sum_over_processes(s); })
               : gradient_scale(params, optim_.grad_clip_norm, 1.0 / out.count);
  out.grad_norm = scale.norm;
  if (!std::isfinite(out.grad_norm)) {
    auto last = latest_checkpoint(run_dir_);
    fail("non-finite gradient norm at step ", step + 1, " (loss ", out.loss_sum / out.count,
         "); training stopped without saving this state. ",
         last ? dew::str("The last good checkpoint is '", last->string(), "'.") : std::string("No checkpoint was written yet."));
  }
  out.lr = learning_rate_at(optim_, step, optim_.schedule_steps(config_.steps));
  optimizer_->step(out.lr, scale.factor);
  ema_->update(step);
  objective_.after_step(step, config_.steps);
  out.seconds = seconds_since(start);
  return out;
}

fs::path Trainer::write_checkpoint(std::int64_t step, std::int64_t data_position, const std::map<std::string, double>& metrics) {
  CheckpointState state;
  state.step = step;
  state.data_position = data_position;
  state.seed = config_.seed;
  state.rng_state = to_hex(at::detail::getDefaultCPUGenerator().get_state());
  state.elapsed_seconds = elapsed_base_ + seconds_since(segment_start_);
  state.tokens_seen = tokens_seen_;
  state.largest_batch_size = largest_batch_size_;
  state.metrics = metrics;
  if (sharded_) {  // each rank writes its rows; rank 0 the manifest, the objective and state.json
    ShardedParts parts;
    parts["params"] = sharded_->checkpoint_rows(params_);
    parts["optimizer"] = sharded_->checkpoint_rows(optimizer_->state());
    if (ema_->enabled()) parts["ema"] = sharded_->checkpoint_rows(ema_->state());
    std::map<std::string, at::Tensor> objective;
    if (leader()) {
      for (const auto& [name, t] : objective_.state()) objective[name] = t.detach().to(at::kCPU).contiguous();
    }
    auto dir = save_sharded_checkpoint(*group_, run_dir_, state, parts, objective);
    if (leader()) prune_checkpoints(run_dir_, config_.keep_checkpoints);
    return dir;
  }
  CheckpointTensors tensors;
  tensors.params = params_;  // what trains: frozen weights (a LoRA run's base) come from where the run started
  tensors.optimizer = optimizer_->state();
  if (ema_->enabled()) tensors.ema = ema_->state();
  if (!leader()) return {};
  for (const auto& [name, t] : objective_.state()) tensors.objective[name] = t.detach().to(at::kCPU).contiguous();
  auto dir = save_checkpoint(run_dir_, state, tensors);
  prune_checkpoints(run_dir_, config_.keep_checkpoints);
  return dir;
}

void Trainer::draw_plots() const {
  const auto tracking = run_dir_ / "tracking";
  if (!fs::exists(tracking / "scalars.jsonl")) return;
  auto records = telemetry::read_scalars(tracking / "scalars.jsonl");
  // loss.png: the training loss with the objective's validation counterpart; then one plot per other
  // validation metric the objective reported (val_perplexity.png, ...), whatever the objective is.
  const std::string validation_loss = objective_.validation_loss();
  std::vector<telemetry::PlotSeries> loss{{"train loss", telemetry::scalar_series(records, "loss")}};
  std::set<std::string> validation_names;
  for (const auto& record : records) {
    for (const auto& [name, value] : record.scalars) {
      if (name.rfind("val/", 0) == 0) validation_names.insert(name.substr(4));
    }
  }
  if (!validation_loss.empty() && validation_names.count(validation_loss)) {
    loss.push_back({"val " + validation_loss, telemetry::scalar_series(records, "val/" + validation_loss)});
  }
  telemetry::write_line_plot(tracking / "loss.png", loss, {.title = "loss", .y_label = "loss"});
  for (const auto& name : validation_names) {
    if (name == validation_loss) continue;
    std::string file = "val_" + name + ".png";
    std::replace(file.begin(), file.end(), '/', '_');  // "rewards/chosen" -> val_rewards_chosen.png
    telemetry::write_line_plot(tracking / file, {{"val " + name, telemetry::scalar_series(records, "val/" + name)}},
                               {.title = "validation " + name, .y_label = name});
  }
}

objectives::Statistics Trainer::evaluate(data::BatchSource& val) {
  EmaScope scope(ema_.get());
  if (!sharded_) return evaluate_objective(objective_, val, config_.batch_size, config_.eval_batches, device_, group_);
  sharded_->gather_root("the root's weights for evaluation");
  auto statistics = evaluate_objective(objective_, val, config_.batch_size, config_.eval_batches, device_, group_);
  sharded_->release_root();
  return statistics;
}

FitResult Trainer::fit(data::BatchSource& train, data::BatchSource* val) {
  // SIGINT/SIGTERM now finish the step and write a checkpoint; a second one quits at once.
  GracefulStop stop("dew: second interrupt, quitting without a checkpoint");
  auto& module = objective_.module();
  std::FILE* const out = leader() ? out_ : nullptr;  // one voice for the whole job
  std::optional<Progress> progress;  // made once the start step is known
  auto say = [&](const std::string& text) {
    if (progress) {
      progress->line(text);
    } else if (out) {
      std::fprintf(out, "%s\n", text.c_str());
      std::fflush(out);
    }
  };

  // Open (and so validate) the checkpoint before anything changes.
  std::optional<Checkpoint> checkpoint;
  if (auto latest = latest_checkpoint(run_dir_)) checkpoint.emplace(*latest);
  if (checkpoint && checkpoint->has_ema() != (config_.ema_decay > 0)) {
    fail("checkpoint '", checkpoint->dir().string(), "' was written ", checkpoint->has_ema() ? "with" : "without",
         " an EMA copy but this run has trainer.ema_decay = ", config_.ema_decay,
         "; a checkpoint does not restore into the other setting");
  }
  if (!checkpoint) {
    if (init_on_fresh_run_) objective_.init(config_.seed);
    at::manual_seed(config_.seed);  // the stream objectives draw noise from on CPU
  }
  module.to(device_);
  module.train();
  params_.clear();
  for (const auto& [name, p] : nn::parameter_map(module)) {
    if (p.requires_grad()) params_[name] = p;
  }
  std::int64_t parameter_count = 0;  // counted whole, before any sharding
  for (const auto& [name, p] : params_) parameter_count += p.numel();
  sharded_.reset();
  buckets_.reset();
  if (group_) share_leader_weights();
  if (group_ && config_.parallel == "fsdp") {
    sharded_ = std::make_unique<ShardedTraining>(*group_, module);
    params_ = sharded_->shards();
  } else if (group_) {
    std::vector<at::Tensor> in_order;  // registration order, which the buckets reverse
    for (const auto& p : module.parameters()) {
      if (p.requires_grad()) in_order.push_back(p);
    }
    buckets_ = std::make_unique<distributed::GradientBuckets>(*group_, in_order);
  }
  optimizer_ = make_optimizer(optim_, params_);
  ema_ = std::make_unique<Ema>(config_.ema_decay, params_, config_.ema_warmup);

  std::int64_t step = 0;
  std::map<std::string, double> last_metrics;
  elapsed_base_ = 0;
  tokens_seen_ = 0;
  largest_batch_size_ = config_.batch_size;
  if (checkpoint) {
    const auto& s = checkpoint->state();
    if (sharded_) {  // this rank's rows, from however many processes wrote the checkpoint
      const auto source = checkpoint->params().source();
      const auto rows = sharded_->rows(checkpoint->params());
      at::NoGradGuard no_grad;
      for (const auto& [name, shard] : params_) {
        auto it = rows.find(name);
        if (it == rows.end()) fail("'", source, "' has no tensor '", name, "'; the checkpoint is damaged");
        shard.copy_(it->second);
      }
      optimizer_->load_state(sharded_->rows(checkpoint->optimizer()), checkpoint->optimizer().source());
      if (ema_->enabled()) ema_->load_state(sharded_->rows(checkpoint->ema()), checkpoint->ema().source());
    } else {
      nn::load_parameters(module, checkpoint->params().all(), checkpoint->params().source());
      optimizer_->load_state(checkpoint->optimizer().all(), checkpoint->optimizer().source());
      if (ema_->enabled()) ema_->load_state(checkpoint->ema().all(), checkpoint->ema().source());
    }
    {
      // Copies, not views of the mapped file: the objective keeps them past this checkpoint's lifetime.
      std::map<std::string, at::Tensor> objective_state;
      if (const auto& file = checkpoint->objective_state()) {
        for (const auto& [name, t] : Checkpoint::tensors(*file)) objective_state[name] = t.clone();
      }
      if (group_ && !objective_state.empty()) {
        // Such state is each process's own (GRPO's rollouts of its prompts) and only rank 0's was saved.
        fail("checkpoint '", checkpoint->dir().string(), "' holds the objective's state between steps (",
             objective_.name(), "), which a multi-process run cannot restore on every process; resume from a checkpoint "
             "without it (for GRPO, a step that is a multiple of grpo.epochs) or with one process");
      }
      objective_.load_state(objective_state);
    }
    const std::string state_file = (checkpoint->dir() / "state.json").string();
    if (!s.rng_state.empty()) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the shared generator
      try {
        generator.set_state(from_hex(s.rng_state, state_file));
      } catch (const c10::Error&) {  // state_from_json checked the size; anything else LibTorch refuses
        fail("'", state_file, "' field 'rng_state' is not a CPU generator state LibTorch accepts; the checkpoint is damaged");
      }
    }
    // The position counts rows read: S steps of at most B rows end at or before S * B, B the largest
    // trainer.batch_size of any segment so far (positions beyond one epoch are fine, the loader wraps them
    // into later epochs). A larger value was never written by a trainer: the file was damaged or edited.
    // Checkpoints from before largest_batch_size was kept are bounded by this segment's batch size.
    largest_batch_size_ = std::max(s.largest_batch_size, config_.batch_size);
    const std::int64_t bound_batch = s.largest_batch_size > 0 ? largest_batch_size_ : config_.batch_size;
    if (static_cast<double>(s.data_position) > static_cast<double>(s.step) * static_cast<double>(bound_batch)) {
      fail("'", state_file, "' has data_position ", s.data_position, ", more rows than ", s.step,
           " steps of at most ", bound_batch, " rows can have read; the checkpoint is damaged or was edited",
           s.largest_batch_size > 0 ? std::string("; resume from another checkpoint")
                                    : std::string(". If the run was trained with a larger trainer.batch_size, resume it with that batch size"));
    }
    train.set_position(s.data_position);
    step = s.step;
    elapsed_base_ = s.elapsed_seconds;
    tokens_seen_ = s.tokens_seen;
    last_metrics = s.metrics;
    say(dew::str("resuming from '", checkpoint->dir().string(), "' at step ", step));
  }
  std::optional<telemetry::LocalTracker> tracker;
  if (leader()) tracker.emplace(run_dir_ / "tracking", step);

  const double flops_per_token = config_.flops_per_token > 0 ? config_.flops_per_token : 6.0 * static_cast<double>(parameter_count);
  double peak = config_.peak_flops;
  if (peak <= 0) {
    // With several processes the leader measures alone (a measurement on every rank at once would share
    // the cores and read low) and the others take its figure.
    peak = leader() ? measure_peak_flops(device_, device_.is_cuda() ? at::kBFloat16 : at::kFloat) : 0;
    if (group_) peak = group_->all_reduce_sum({peak}, "the peak FLOP/s measurement")[0];
  }
  const std::int64_t world = group_ ? group_->world() : 1;
  say(dew::str("training ", objective_.name(), ": ", human_count(static_cast<double>(parameter_count), "parameters"),
                        " on ", device_.str(), ", steps ", step, " -> ", config_.steps, ", batch ", config_.batch_size,
                        config_.grad_accum > 1 ? dew::str(" (", config_.grad_accum, " micro-batches)") : std::string(),
                        world > 1 ? dew::str(" over ", world, " processes (", sharded_ ? "sharded" : "data parallel", ")")
                                  : std::string(),
                        ", peak ", human_count(peak, "FLOP/s"), world > 1 ? " each" : "",
                        ", weights and optimizer state ", human_count(static_cast<double>(resident_state_bytes()), "B"),
                        world > 1 ? " per process" : ""));
  // The bar (on a terminal) between the log lines, which are the record elsewhere; timed from here, after
  // the peak measurement, so its ETA counts training steps only.
  progress.emplace("train", static_cast<std::uint64_t>(config_.steps), "",
                   ProgressOptions{.out = out, .lines_when_not_terminal = false, .start = static_cast<std::uint64_t>(step)});

  FitResult result;
  result.metrics = last_metrics;
  segment_start_ = Clock::now();
  double window_loss = 0, window_count = 0, window_seconds = 0;
  std::int64_t window_steps = 0;
  objectives::Statistics window_metrics;

  bool stopping = false;  // agreed by every rank: they stop at the same step
  const std::int64_t first_step = step + 1;
  while (step < config_.steps && !stopping) {
    StepOutcome outcome;
    if (step + 1 == config_.trace_step) {
      const auto& place = distributed::process_place();
      const auto path = step_trace_path(run_dir_, step + 1, place.rank, place.world);
      run_traced(path, [&] { outcome = train_step(train, step, stop); });
      say(dew::str("step ", step + 1, "'s ops traced to '", path.string(), "' (LibTorch's profiler; the step is slower for it)"));
    } else {
      outcome = train_step(train, step, stop);
    }
    ++step;
    if (step == first_step) {
      // Start-up cost, as a user waits for it: process start (loader, LibTorch) to the end of the first step.
      if (auto since_start = seconds_since_process_start()) {
        char line[160];
        std::snprintf(line, sizeof line, "first step done %.2f s after the process started (the step itself %.2f s)", *since_start,
                      outcome.seconds);
        say(line);
      }
    }
    tokens_seen_ += outcome.count;
    window_loss += outcome.loss_sum, window_count += outcome.count, window_seconds += outcome.seconds;
    window_metrics.merge(outcome.metrics);
    ++window_steps;

    if (on_step_) {
      std::map<std::string, double> now = outcome.metrics.summary();
      now["loss"] = outcome.loss_sum / outcome.count;
      now["lr"] = outcome.lr;
      now["grad_norm"] = outcome.grad_norm;
      on_step_(step, now);
    }
    progress->set(static_cast<std::uint64_t>(step), dew::str("loss ", format_value("loss", outcome.loss_sum / outcome.count)));
    // One process stops on its own signal; several on a request any of them had at the step's sum.
    stopping = group_ ? outcome.stop : stop.requested();

    const bool last = step == config_.steps;
    const bool eval_due = val && ((config_.eval_every > 0 && step % config_.eval_every == 0) || last);
    if (step % config_.log_every == 0 || last || eval_due || stopping) {
      std::map<std::string, double> scalars = window_metrics.summary();
      scalars["loss"] = window_loss / window_count;
      scalars["lr"] = outcome.lr;
      scalars["grad_norm"] = outcome.grad_norm;
      scalars["step_seconds"] = window_seconds / static_cast<double>(window_steps);
      scalars[objective_.count_unit() + "_per_second"] = window_count / window_seconds;
      if (objective_.fixed_flops_per_count()) scalars["mfu"] = flops_per_token * (window_count / window_seconds) / (peak * static_cast<double>(world));
      if (eval_due) {
        auto summary = evaluate(*val).summary();
        result.validation = summary;
        for (const auto& [name, v] : summary) scalars["val/" + name] = v;
        if (on_eval_ && leader()) {
          EmaScope scope(ema_.get());
          at::NoGradGuard no_grad;
          module.eval();
          on_eval_(step);
          module.train();
        }
      }
      if (tracker) tracker->log(step, scalars);
      say(log_line(step, config_.steps, scalars));
      result.metrics = scalars;
      window_loss = window_count = window_seconds = 0;
      window_steps = 0;
      window_metrics = {};
    }
    if ((config_.checkpoint_every > 0 && step % config_.checkpoint_every == 0) || last || stopping) {
      if (leader() || sharded_) result.checkpoint = write_checkpoint(step, train.position(), result.metrics);
      if (group_) {
        group_->barrier(dew::str("the checkpoint of step ", step));  // no rank runs ahead of a checkpoint being written
        if (!leader()) result.checkpoint = latest_checkpoint(run_dir_).value_or(fs::path());
      }
    }
  }
  result.step = step;
  result.interrupted = stopping;
  if (result.interrupted) {
    say(dew::str("stopped by signal ", stop.signal(), " after step ", step, "; checkpoint '",
                          result.checkpoint.string(), "'. Run again to resume."));
  }
  if (result.checkpoint.empty()) {
    if (auto latest = latest_checkpoint(run_dir_)) result.checkpoint = *latest;
  }
  if (leader()) draw_plots();
  if (group_) group_->barrier("the end of training");
  sharded_.reset();  // the module holds its whole weights again
  return result;
}

std::int64_t Trainer::resident_state_bytes() const {
  std::int64_t bytes = 0;
  auto add = [&](const std::map<std::string, at::Tensor>& tensors) {
    for (const auto& [name, t] : tensors) bytes += t.numel() * static_cast<std::int64_t>(t.element_size());
  };
  add(params_);
  if (optimizer_) add(optimizer_->state());
  if (ema_ && ema_->enabled()) add(ema_->state());
  return bytes;
}

void Trainer::share_leader_weights() {
  // Every rank starts from rank 0's weights and buffers, as PyTorch's DDP does at construction: a run that
  // initialises or loads differently on some rank (another seed, another file) cannot drift apart.
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> state;
  for (const auto& p : objective_.module().parameters()) state.push_back(p.detach());
  for (const auto& b : objective_.module().buffers()) state.push_back(b);
  std::vector<at::Tensor> copies;
  for (const auto& t : state) copies.push_back(t.contiguous());
  group_->broadcast(copies, 0, "the leader's initial weights");
  for (std::size_t i = 0; i < state.size(); ++i) {
    if (!copies[i].is_same(state[i])) state[i].copy_(copies[i]);
  }
}

}  // namespace dew::training
