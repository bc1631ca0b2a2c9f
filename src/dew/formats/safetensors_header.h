#pragma once
// The safetensors header, parsed and checked without LibTorch (so it can be fuzzed alone).
//
// A file is an 8-byte little-endian header length, a JSON object naming each tensor's dtype, shape and
// byte range [begin, end) within the data section that follows, plus an optional "__metadata__" object of
// strings. The checks: the header's size (at most 100 MB, inside the file), valid JSON of the right shape,
// known dtypes, every range inside the data section, ranges not overlapping, names unique, and each shape's
// byte count equal to its range.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dew::formats {

struct SafetensorsEntry {
  std::string dtype;  // as written: F32, BF16, I64, ...
  std::vector<std::int64_t> shape;
  std::size_t begin = 0, end = 0;  // byte range within the data section
};

struct SafetensorsHeader {
  std::size_t data_start = 0;  // file offset of the data section
  std::map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  std::vector<std::string> names_in_data_order() const;
};

// Bytes per element of a safetensors dtype name, 0 for a name safetensors does not define (or dew does not read).
std::size_t safetensors_dtype_bytes(const std::string& dtype);

// `file` holds the whole file (`size` bytes); `where` names it in errors.
SafetensorsHeader parse_safetensors_header(const std::uint8_t* file, std::size_t size, const std::string& where);

}  // namespace dew::formats
