#include "dew/training/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/nn/parameters.h"

namespace fs = std::filesystem;

namespace dew::training {
namespace {

constexpr const char* kParams = "params.safetensors";
constexpr const char* kOptimizer = "optimizer.safetensors";
constexpr const char* kEma = "ema.safetensors";
constexpr const char* kObjective = "objective.safetensors";
constexpr const char* kState = "state.json";

std::optional<std::int64_t> step_of(const std::string& name) {
  if (name.empty() || name.size() > 18 || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  std::int64_t step = 0;
  std::from_chars(name.data(), name.data() + name.size(), step);
  return step;
}

nlohmann::ordered_json state_to_json(const CheckpointState& s) {
  nlohmann::ordered_json j;
  j["step"] = s.step;
  j["data_position"] = s.data_position;
  j["seed"] = s.seed;
  j["rng_state"] = s.rng_state;
  j["elapsed_seconds"] = s.elapsed_seconds;
  j["tokens_seen"] = s.tokens_seen;
  j["largest_batch_size"] = s.largest_batch_size;
  j["metrics"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : s.metrics) j["metrics"][k] = v;  // non-finite values become null
  return j;
}

CheckpointState state_from_json(const fs::path& file) {
  auto j = config::parse_json_file(file);
  auto need = [&](const char* field) -> const nlohmann::ordered_json& {
    if (!j.is_object() || !j.contains(field)) fail("'", file.string(), "' lacks field '", field, "'; the checkpoint is incomplete");
    return j.at(field);
  };
  auto integer = [&](const char* field) {
    const auto& v = need(field);
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0)) {
      fail("'", file.string(), "' field '", field, "' must be a non-negative integer, got ", v.dump());
    }
    return v;
  };
  auto number = [&](const char* field) {
    const auto& v = need(field);
    if (!v.is_number()) fail("'", file.string(), "' field '", field, "' must be a number, got ", v.dump());
    return v.get<double>();
  };
  CheckpointState s;
  s.step = integer("step").get<std::int64_t>();
  s.data_position = integer("data_position").get<std::int64_t>();
  s.seed = integer("seed").get<std::uint64_t>();
  const auto& rng = need("rng_state");
  if (!rng.is_string()) fail("'", file.string(), "' field 'rng_state' must be a string");
  s.rng_state = rng.get<std::string>();
  // LibTorch checks a generator state only by an internal assertion (a stack trace naming no file), so
  // it is checked here: lowercase hex of exactly the CPU generator's state size (empty = not saved).
  if (!s.rng_state.empty()) {
    const bool hex = std::all_of(s.rng_state.begin(), s.rng_state.end(),
                                 [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    if (!hex || s.rng_state.size() % 2 != 0) {
      fail("'", file.string(), "' field 'rng_state' is not an even number of lowercase hex digits; the checkpoint is damaged");
    }
    const auto expected = static_cast<std::size_t>(at::detail::getDefaultCPUGenerator().get_state().numel());
    if (s.rng_state.size() / 2 != expected) {
      fail("'", file.string(), "' field 'rng_state' holds ", s.rng_state.size() / 2, " bytes; a CPU generator state is ",
           expected, " bytes: the checkpoint is damaged (truncated or edited); resume from another checkpoint");
    }
  }
  s.elapsed_seconds = number("elapsed_seconds");
  s.tokens_seen = number("tokens_seen");
  if (j.contains("largest_batch_size")) s.largest_batch_size = integer("largest_batch_size").get<std::int64_t>();
  const auto& metrics = need("metrics");
  if (!metrics.is_object()) fail("'", file.string(), "' field 'metrics' must be an object");
  for (auto it = metrics.begin(); it != metrics.end(); ++it) {
    s.metrics[it.key()] = it.value().is_number() ? it.value().get<double>() : std::nan("");
  }
  return s;
}

formats::SafetensorsFile open_required(const fs::path& file) {
  if (!fs::is_regular_file(file)) fail("checkpoint file '", file.string(), "' is missing; the checkpoint is incomplete");
  try {
    return formats::SafetensorsFile(file);
  } catch (const Error& e) {
    fail("checkpoint file '", file.string(), "' is corrupt: ", e.what());
  }
}

}  // namespace

fs::path save_checkpoint(const fs::path& run_dir, const CheckpointState& state, const CheckpointTensors& tensors) {
  fs::create_directories(run_dir);
  // What a writer killed mid-save left (.N.partial-PID-K, .N.old-PID-K, .run.json.tmp-PID-K): orphans once
  // their process is gone. The run directory has one writer (the trainer under `dew train`'s lock).
  remove_stale_temporaries(run_dir);
  const fs::path destination = run_dir / std::to_string(state.step);
  AtomicDirectory dir(destination);
  formats::save_safetensors(dir.path() / kParams, tensors.params);
  formats::save_safetensors(dir.path() / kOptimizer, tensors.optimizer);
  if (!tensors.ema.empty()) formats::save_safetensors(dir.path() / kEma, tensors.ema);
  if (!tensors.objective.empty()) formats::save_safetensors(dir.path() / kObjective, tensors.objective);
  write_checkpoint_state(dir.path(), state);
  dir.commit();
  return destination;
}

void write_checkpoint_state(const fs::path& dir, const CheckpointState& state) {
  write_file_atomic(dir / kState, state_to_json(state).dump(2) + "\n");
}

std::vector<std::int64_t> checkpoint_steps(const fs::path& run_dir) {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return steps;
  for (const auto& entry : fs::directory_iterator(run_dir)) {
    if (!entry.is_directory()) continue;
    if (auto step = step_of(entry.path().filename().string())) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  auto steps = checkpoint_steps(run_dir);
  if (steps.empty()) return std::nullopt;
  return run_dir / std::to_string(steps.back());
}

void prune_checkpoints(const fs::path& run_dir, std::int64_t keep) {
  if (keep <= 0) return;
  auto steps = checkpoint_steps(run_dir);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < steps.size(); ++i) {
    std::error_code ec;
    fs::remove_all(run_dir / std::to_string(steps[i]), ec);
    if (ec) fail("cannot remove old checkpoint '", (run_dir / std::to_string(steps[i])).string(), "': ", ec.message());
  }
}

// A step directory that cannot be opened (empty, incomplete or corrupt) is refused, never skipped for an
// older one: dew writes checkpoints whole (by rename), so a broken one means something outside dew
// interfered, and silently using an older step would report an evaluation, or continue training, from a
// step the user did not ask for. The error says which older steps open cleanly and how to use one.
Checkpoint::Checkpoint(fs::path dir) try : Checkpoint(dir, Unchecked{}) {
} catch (const Error& e) {
  fail(e.what(), older_checkpoints_hint(dir));
}

std::string Checkpoint::older_checkpoints_hint(const fs::path& dir) {
  auto step = step_of(dir.filename().string());
  if (!step) return "";
  const fs::path run_dir = dir.parent_path();
  const auto steps = checkpoint_steps(run_dir);
  std::vector<std::int64_t> good;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (*it >= *step) continue;
    try {
      (void)Checkpoint(run_dir / std::to_string(*it), Unchecked{});
      good.push_back(*it);
    } catch (const Error&) {
    }
  }
  if (good.empty()) return dew::str("; the run has no older checkpoint that opens");
  std::string list;
  for (auto s : good) list += (list.empty() ? "" : ", ") + std::to_string(s);
  std::string hint = dew::str("; older checkpoints: ", list, ". Evaluate or generate from one with --step ", good.front());
  if (!steps.empty() && *step == steps.back()) {
    hint += dew::str(", or remove '", dir.string(), "' to resume training from step ", good.front());
  }
  return hint;
}

Checkpoint::Checkpoint(const fs::path& dir, Unchecked)
    : dir_(dir),
      state_([this] {
        if (!fs::is_directory(dir_)) fail("checkpoint directory '", dir_.string(), "' does not exist");
        std::error_code ec;
        if (fs::is_empty(dir_, ec)) {
          fail("checkpoint directory '", dir_.string(), "' is empty (dew writes a checkpoint whole, by rename, so "
               "something else created or emptied it)");
        }
        if (!fs::is_regular_file(dir_ / kState)) {
          fail("checkpoint file '", (dir_ / kState).string(), "' is missing; the checkpoint is incomplete");
        }
        return state_from_json(dir_ / kState);
      }()),
      sharded_parts_(fs::exists(dir_ / kShardManifest) ? open_sharded_parts(dir_) : std::map<std::string, CheckpointPart>{}),
      params_(*open_part("params", /*required=*/true)),
      optimizer_(*open_part("optimizer", /*required=*/true)),
      ema_(open_part("ema", /*required=*/false)) {
  if (fs::exists(dir_ / kObjective)) objective_.emplace(open_required(dir_ / kObjective));
  if (auto name_step = step_of(dir_.filename().string()); name_step && *name_step != state_.step) {
    fail("'", (dir_ / kState).string(), "' says step ", state_.step, " but the directory is named ", *name_step);
  }
}

std::optional<CheckpointPart> Checkpoint::open_part(const std::string& name, bool required) const {
  if (!sharded_parts_.empty()) {
    auto it = sharded_parts_.find(name);
    if (it != sharded_parts_.end()) return it->second;
    if (required) fail("'", (dir_ / kShardManifest).string(), "' lists no part '", name, "'; the checkpoint is incomplete");
    return std::nullopt;
  }
  const fs::path file = dir_ / (name + ".safetensors");
  if (!required && !fs::exists(file)) return std::nullopt;
  return CheckpointPart(open_required(file));
}

const CheckpointPart& Checkpoint::ema() const {
  if (!ema_) fail("checkpoint '", dir_.string(), "' holds no EMA copy (", kEma, "); the run had trainer.ema_decay = 0");
  return *ema_;
}

std::map<std::string, at::Tensor> Checkpoint::tensors(const formats::SafetensorsFile& file) {
  std::map<std::string, at::Tensor> out;
  for (const auto& name : file.names()) out[name] = file.view(name);
  return out;
}

fs::path load_checkpoint_weights(torch::nn::Module& module, const fs::path& checkpoint, bool use_ema) {
  fs::path dir = checkpoint;
  if (!step_of(checkpoint.filename().string()) && !fs::exists(checkpoint / kState)) {
    auto latest = latest_checkpoint(checkpoint);
    if (!latest) fail("'", checkpoint.string(), "' holds no checkpoint (no step directory with ", kState, ")");
    dir = *latest;
  }
  Checkpoint opened(dir);
  const CheckpointPart& part = use_ema && opened.has_ema() ? opened.ema() : opened.params();
  nn::load_parameters(module, part.all(), part.source());
  return dir;
}

}  // namespace dew::training
