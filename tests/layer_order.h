#pragma once
// The layer rule of docs/architecture.md, checked on a source tree: every folder under src/dew has a
// level in the doc's `layer-order` block (bottom first, one level a line, folders on one line are peers),
// and a file may include only its own folder or folders on lower lines. The order is read from the doc,
// never copied here, so moving a folder is an edit of the doc that this check then holds the code to.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dew::test {

// Folder ("nn/quantized") -> level (0 = bottom). Parsed from the first ```layer-order fenced block of a
// markdown text; `#` starts a comment. Throws std::runtime_error for a missing block or a folder listed
// twice.
std::map<std::string, int> parse_layer_order(const std::string& markdown);

// Every breach of the rule in the tree under `src_root` (the directory holding the layer folders, i.e.
// src/dew), one line each, naming file and line: an include of a higher or peer folder (saying so when the
// two include each other), a folder the order does not list, a quoted include that is not "dew/...".
// Empty when the tree keeps the order.
std::vector<std::string> layer_violations(const std::filesystem::path& src_root, const std::map<std::string, int>& order);

}  // namespace dew::test
