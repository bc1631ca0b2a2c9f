#include "dew/runs/kind_defaults.h"

#include <mutex>

namespace dew::runs {

const config::Json& kind_defaults(const std::string& kind) {
  static std::mutex mutex;
  static std::map<std::string, config::Json> parsed;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = parsed.find(kind);
  if (it != parsed.end()) return it->second;
  const auto& files = kind_default_files();
  auto file = files.find(kind);
  config::Json json = file == files.end() ? config::Json::object()
                                          : config::parse_json_text(file->second, "configs/kinds/" + kind + ".json (built into dew)");
  return parsed.emplace(kind, std::move(json)).first->second;
}

}  // namespace dew::runs
