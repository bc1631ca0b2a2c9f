#include "layer_order.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace dew::test {
namespace fs = std::filesystem;

std::map<std::string, int> parse_layer_order(const std::string& markdown) {
  std::istringstream in(markdown);
  std::string line;
  bool inside = false, found = false;
  int level = 0;
  std::map<std::string, int> order;
  while (std::getline(in, line)) {
    if (!inside) {
      if (line.rfind("```layer-order", 0) == 0) inside = found = true;
      continue;
    }
    if (line.rfind("```", 0) == 0) break;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string folder;
    bool any = false;
    while (words >> folder) {
      if (!order.emplace(folder, level).second) throw std::runtime_error("layer-order lists \"" + folder + "\" twice");
      any = true;
    }
    if (any) ++level;
  }
  if (!found) throw std::runtime_error("no ```layer-order block");
  return order;
}

namespace {

struct Include {
  std::string file;  // relative to the source root
  int line;
  std::string from, to;  // folders
};

std::string folder_of(const std::string& relative_file) {
  const auto slash = relative_file.rfind('/');
  return slash == std::string::npos ? "" : relative_file.substr(0, slash);
}

std::string where(const Include& inc) { return "src/dew/" + inc.file + ":" + std::to_string(inc.line); }

}  // namespace

std::vector<std::string> layer_violations(const fs::path& src_root, const std::map<std::string, int>& order) {
  static const std::regex quoted(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> out;
  std::vector<Include> includes;
  std::set<std::string> folders;
  for (const auto& entry : fs::recursive_directory_iterator(src_root)) {
    const std::string rel = fs::relative(entry.path(), src_root).generic_string();
    if (entry.is_directory()) {
      folders.insert(rel);
      continue;
    }
    const auto ext = entry.path().extension();
    if (ext != ".h" && ext != ".cpp") continue;
    std::ifstream file(entry.path());
    std::string text;
    for (int n = 1; std::getline(file, text); ++n) {
      std::smatch m;
      if (!std::regex_search(text, m, quoted)) continue;
      const std::string target = m[1];
      if (target.rfind("dew/", 0) != 0) {
        out.push_back("src/dew/" + rel + ":" + std::to_string(n) + ": includes \"" + target +
                      "\"; include dew's own headers by their full name, \"dew/FOLDER/FILE\"");
        continue;
      }
      includes.push_back({rel, n, folder_of(rel), folder_of(target.substr(4))});
    }
  }
  for (const auto& folder : folders) {
    if (!order.count(folder)) {
      out.push_back("src/dew/" + folder + "/: not in docs/architecture.md's layer-order block; give it a level there");
    }
  }
  std::set<std::pair<std::string, std::string>> edges;
  for (const auto& inc : includes) {
    if (inc.from != inc.to) edges.insert({inc.from, inc.to});
  }
  for (const auto& inc : includes) {
    if (inc.from == inc.to) continue;
    const auto from = order.find(inc.from), to = order.find(inc.to);
    if (from == order.end() || to == order.end()) continue;  // reported above (or a header that does not exist)
    if (edges.count({inc.to, inc.from})) {
      out.push_back(where(inc) + ": " + inc.from + " includes " + inc.to + ", and " + inc.to + " includes " + inc.from +
                    "; two folders may not include each other");
    } else if (to->second > from->second) {
      out.push_back(where(inc) + ": " + inc.from + " (level " + std::to_string(from->second) + ") includes " + inc.to +
                    " (level " + std::to_string(to->second) + "), a higher layer");
    } else if (to->second == from->second) {
      out.push_back(where(inc) + ": " + inc.from + " includes its peer " + inc.to +
                    " (the same line of the layer order); peers may not include each other");
    }
  }
  return out;
}

}  // namespace dew::test
