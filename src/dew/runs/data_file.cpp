#include "dew/runs/data_file.h"

#include <filesystem>
#include <system_error>

#include "dew/core/error.h"

namespace dew::runs {

void require_data_file(std::string& path, const std::string& file, const std::string& shape) {
  namespace fs = std::filesystem;
  if (path.empty()) fail("data.path is not set: pass --data ", file, shape);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail("data.path '", path, "' is not a file; pass --data ", file);
  path = fs::absolute(path).lexically_normal().string();
}

}  // namespace dew::runs
