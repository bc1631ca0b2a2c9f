#include "dew/core/process_clock.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace dew {

std::optional<double> seconds_since_process_start() {
  std::ifstream uptime_file("/proc/uptime"), stat_file("/proc/self/stat");
  double uptime = 0;
  std::string stat;
  if (!(uptime_file >> uptime) || !std::getline(stat_file, stat)) return std::nullopt;
  // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i != 22) continue;
    const long ticks_per_second = sysconf(_SC_CLK_TCK);
    if (ticks_per_second <= 0) return std::nullopt;
    return uptime - std::stod(field) / static_cast<double>(ticks_per_second);
  }
  return std::nullopt;
}

}  // namespace dew
