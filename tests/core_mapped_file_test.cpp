// MappedFile (core/mapped_file.h): dropping pages frees this process's resident memory for them and never
// changes what the map reads.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "dew/core/mapped_file.h"
#include "test_support.h"

namespace {

// The resident kilobytes of the mapping that starts at `start`, from /proc/self/smaps.
std::int64_t resident_kib(const void* start) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    std::uint64_t from = 0, to = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find("-") != std::string::npos && (head >> std::hex >> from >> dash >> to) && dash == '-' && line.find(':') > line.find(' ')) {
      in_mapping = from == reinterpret_cast<std::uintptr_t>(start);
      continue;
    }
    if (in_mapping && line.rfind("Rss:", 0) == 0) return std::stoll(line.substr(4));
  }
  return -1;
}

TEST(MappedFile, DroppedPagesLeaveTheProcessAndReadBackTheSame) {
  dew::test::TempDir dir;
  const auto path = dir.path() / "bytes.bin";
  std::vector<std::uint8_t> bytes(8 << 20);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 13);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));

  dew::MappedFile map(path);
  ASSERT_EQ(map.size(), bytes.size());
  auto sum = [&] { return std::accumulate(map.data(), map.data() + map.size(), std::uint64_t{0}); };
  const auto expected = std::accumulate(bytes.begin(), bytes.end(), std::uint64_t{0});
  EXPECT_EQ(sum(), expected);  // every page touched: the whole 8 MiB resident
  const auto touched = resident_kib(map.data());
  ASSERT_GE(touched, 8 * 1024 - 64) << "no smaps entry for the map, or it is not resident";

  // Drop the middle 6 MiB (unaligned ends: only the whole pages inside go).
  map.drop_pages(1'000'001, 6 << 20);
  const auto dropped = resident_kib(map.data());
  EXPECT_LE(dropped, touched - 6 * 1024 + 8) << "the dropped range is still resident";
  EXPECT_EQ(sum(), expected);  // read again from the file: the same bytes
  EXPECT_GE(resident_kib(map.data()), 8 * 1024 - 64);

  map.drop_pages(map.size() + 10, 100);  // past the end: nothing happens
  map.drop_pages(0, 0);
  EXPECT_EQ(sum(), expected);
}

}  // namespace
