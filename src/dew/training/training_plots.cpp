#include "dew/training/training_plots.h"

#include <algorithm>
#include <set>
#include <vector>

#include "dew/telemetry/local_tracker.h"
#include "dew/telemetry/plot.h"

namespace dew::training {
namespace fs = std::filesystem;

void draw_training_plots(const std::filesystem::path& tracking, const std::string& validation_loss) {
  if (!fs::exists(tracking / "scalars.jsonl")) return;
  auto records = telemetry::read_scalars(tracking / "scalars.jsonl");
  // loss.png: the training loss with the objective's validation counterpart; then one plot per other
  // validation metric the objective reported (val_perplexity.png, ...), whatever the objective is.
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

}  // namespace dew::training
