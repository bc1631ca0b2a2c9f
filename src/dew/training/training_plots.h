#pragma once
// The plots a run's tracking directory gets when fit() returns: loss.png (the training loss beside the
// objective's validation counterpart) and one val_NAME.png per other validation metric, whatever the
// objective reported.
#include <filesystem>
#include <string>

namespace dew::training {

// From tracking/scalars.jsonl; nothing when it does not exist. `validation_loss` names the metric plotted
// beside the loss (Objective::validation_loss(); "" = none).
void draw_training_plots(const std::filesystem::path& tracking, const std::string& validation_loss);

}  // namespace dew::training
