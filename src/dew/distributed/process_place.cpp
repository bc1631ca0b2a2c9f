#include "dew/distributed/process_place.h"

#include <cstdlib>
#include <optional>

#include "dew/core/error.h"

namespace dew::distributed {
namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

std::int64_t integer_variable(const char* name, const std::string& value, std::int64_t low, std::int64_t high) {
  std::size_t used = 0;
  long long parsed = 0;
  try {
    parsed = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || parsed < low || parsed > high) {
    fail("environment variable ", name, "='", value, "' is not an integer in [", low, ", ", high,
         "]; start multi-process training with `dew launch` (or torchrun), which sets it");
  }
  return parsed;
}

}  // namespace

std::string ProcessPlace::describe() const { return str("rank ", rank, "/", world); }

ProcessPlace place_from_environment() {
  ProcessPlace place;
  const auto rank = variable("RANK"), world = variable("WORLD_SIZE");
  if (!rank && !world) return place;
  if (!rank || !world) {
    fail("environment variable ", rank ? "RANK" : "WORLD_SIZE", " is set but ", rank ? "WORLD_SIZE" : "RANK",
         " is not; a multi-process job needs both (dew launch sets them)");
  }
  place.world = integer_variable("WORLD_SIZE", *world, 1, 1 << 20);
  place.rank = integer_variable("RANK", *rank, 0, place.world - 1);
  place.local_world = place.world;
  if (const auto v = variable("LOCAL_WORLD_SIZE")) place.local_world = integer_variable("LOCAL_WORLD_SIZE", *v, 1, place.world);
  place.local_rank = place.world == place.local_world ? place.rank : 0;
  if (const auto v = variable("LOCAL_RANK")) place.local_rank = integer_variable("LOCAL_RANK", *v, 0, place.local_world - 1);
  if (const auto v = variable("MASTER_ADDR")) place.master_addr = *v;
  if (const auto v = variable("MASTER_PORT")) place.master_port = integer_variable("MASTER_PORT", *v, 1, 65535);
  if (place.world > 1 && !variable("MASTER_ADDR")) {
    fail("WORLD_SIZE=", place.world, " but MASTER_ADDR is not set: the processes cannot find each other; "
         "start them with `dew launch` (or set MASTER_ADDR and MASTER_PORT to rank 0's host and a free port)");
  }
  return place;
}

const ProcessPlace& process_place() {
  static const ProcessPlace place = place_from_environment();
  return place;
}

}  // namespace dew::distributed
