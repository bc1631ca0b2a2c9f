// `dew probe RUN --method knn|linear`: how well a JEPA run's encoder separates the classes of labelled
// images, beside the same probe on a freshly initialised encoder and on raw pixels.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dew/cli/commands.h"
#include "dew/distributed/torch_threads.h"
#include "dew/core/interrupt.h"
#include "dew/runs/run_kind.h"

namespace dew::cli {

void add_probe_command(CLI::App& app) {
  auto request = std::make_shared<runs::ProbeRequest>();
  auto run_dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("probe", "Probe a JEPA run's frozen encoder with kNN or a linear classifier");
  cmd->add_option("run_dir", *run_dir, "run directory written by `dew train jepa`")->required();
  cmd->add_option("--method", request->method, "knn (weighted k-nearest neighbours) or linear (default knn)");
  cmd->add_option("--encoder", request->encoder, "context (default; on runs of a few thousand steps the EMA target, momentum 0.996, still lags it) or target (the EMA encoder, what I-JEPA evaluates)");
  cmd->add_option("--data", request->data, "labelled images: an IDX directory (its t10k split is the test set) or an image "
                  "directory / IDX files without one (a holdout of data.val_fraction is; default: the run's data)");
  cmd->add_option("--k", request->k, "knn: neighbours that vote (default 20)");
  cmd->add_option("--temperature", request->temperature, "knn: vote weight exp(similarity / T) (default 0.07)");
  cmd->add_option("--linear-steps", request->linear_steps, "linear: full-batch Adam steps (default 300)");
  cmd->add_option("--max-train", request->max_train, "use only the first N training images (default: all)");
  cmd->add_option("--step", request->step, "checkpoint step (default: the newest)");
  cmd->add_option("--device", request->device, "cpu, cuda, cuda:N (default: the run's trainer.device)");
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->callback([request, run_dir, json] {
    exit_on_interrupt();
    distributed::use_available_threads();
    auto run = runs::open_run(*run_dir);
    const auto r = run->probe(*request);
    if (*json) {
      nlohmann::ordered_json j;
      j["method"] = r.method;
      j["encoder"] = r.encoder;
      j["top1"] = r.top1;
      j["random_init_top1"] = r.random_init_top1;
      j["pixels_top1"] = r.pixels_top1;
      j["train_images"] = r.train_images;
      j["test_images"] = r.test_images;
      j["test_split"] = r.test_split;
      j["checkpoint"] = r.checkpoint;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("%s probe of the %s encoder of '%s' (%lld training, %lld test images, %s): top-1 %.4f; a random encoder %.4f; raw pixels %.4f\n",
                r.method.c_str(), r.encoder.c_str(), r.checkpoint.c_str(), static_cast<long long>(r.train_images), static_cast<long long>(r.test_images),
                r.test_split.c_str(),
                r.top1, r.random_init_top1, r.pixels_top1);
  });
}

}  // namespace dew::cli
