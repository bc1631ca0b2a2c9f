#include "dew/launch/environment_contract.h"

#include <array>

#include "dew/core/error.h"
#include "dew/core/printable.h"

namespace dew::launch {

namespace {
constexpr std::array<const char*, 6> kNames = {"MASTER_ADDR", "MASTER_PORT", "RANK",
                                                "WORLD_SIZE",  "LOCAL_RANK",  "LOCAL_WORLD_SIZE"};

// The name goes into `env NAME=VALUE` on a remote shell's command line, where anything else would be
// read as the command.
bool shell_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}
}  // namespace

std::vector<EnvVar> contract_environment(const Contract& c) {
  return {{kNames[0], c.master_addr},
          {kNames[1], std::to_string(c.master_port)},
          {kNames[2], std::to_string(c.rank)},
          {kNames[3], std::to_string(c.world_size)},
          {kNames[4], std::to_string(c.local_rank)},
          {kNames[5], std::to_string(c.local_world_size)}};
}

bool is_contract_variable(const std::string& name) {
  for (const char* known : kNames) {
    if (name == known) return true;
  }
  return false;
}

std::vector<EnvVar> parse_env_pairs(const std::vector<std::string>& pairs) {
  std::vector<EnvVar> out;
  for (const auto& pair : pairs) {
    auto eq = pair.find('=');
    if (eq == std::string::npos) {
      fail("--env '", printable(pair), "' has no '='; write KEY=VALUE, e.g. --env NCCL_DEBUG=INFO");
    }
    EnvVar var{pair.substr(0, eq), pair.substr(eq + 1)};
    if (!shell_name(var.name)) {
      fail("--env '", printable(pair), "': '", printable(var.name),
           "' is not a variable name; use letters, digits and '_', not starting with a digit");
    }
    if (is_contract_variable(var.name)) {
      fail("--env '", printable(pair), "': dew launch sets ", var.name,
           " itself (it differs per rank); drop it (use --master-addr / --master-port for the rendezvous)");
    }
    out.push_back(var);
  }
  return out;
}

}  // namespace dew::launch
