#pragma once
// data.path of a kind that reads one file (DPO's preference pairs, GRPO's prompts): set, a regular file,
// made absolute. `file` names it in the refusals ("PAIRS.jsonl") and `shape` says what a line holds.
#include <string>

namespace dew::runs {

void require_data_file(std::string& path, const std::string& file, const std::string& shape);

}  // namespace dew::runs
