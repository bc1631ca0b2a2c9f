#include "dew/formats/safetensors_header.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "dew/core/error.h"

namespace dew::formats {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit

struct DtypeSize {
  const char* name;
  std::size_t bytes;
};

constexpr DtypeSize kDtypeSizes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
    {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4}, {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    {"F8_E8M0", 1},  // DeepSeek-V3.2's power-of-two fp8 block scales
};

}  // namespace

std::size_t safetensors_dtype_bytes(const std::string& dtype) {
  for (const auto& d : kDtypeSizes) {
    if (dtype == d.name) return d.bytes;
  }
  return 0;
}

std::vector<std::string> SafetensorsHeader::names_in_data_order() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries) out.push_back(name);
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return entries.at(a).begin < entries.at(b).begin; });
  return out;
}

namespace {

// One tensor's entry: dtype known, shape within bounds, its byte range inside the data section and as long
// as the shape and dtype need. `context` names the file and tensor in the refusals.
SafetensorsEntry parse_entry(const nlohmann::json& spec, std::size_t data_size, const std::string& context) {
  if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets")) {
    dew::fail(context, ": needs dtype, shape and data_offsets");
  }
  if (!spec["dtype"].is_string() || !spec["shape"].is_array() || !spec["data_offsets"].is_array() ||
      spec["data_offsets"].size() != 2) {
    dew::fail(context, ": dtype must be a string, shape a list, data_offsets a pair");
  }
  SafetensorsEntry entry;
  entry.dtype = spec["dtype"].get<std::string>();
  const std::size_t element_bytes = safetensors_dtype_bytes(entry.dtype);
  if (element_bytes == 0) dew::fail(context, ": unknown dtype '", entry.dtype, "'");
  std::uint64_t elements = 1;
  for (const auto& d : spec["shape"]) {
    if (!d.is_number_unsigned()) dew::fail(context, ": shape entries must be non-negative integers, got ", d.dump());
    auto n = d.get<std::uint64_t>();
    if (n > (std::uint64_t{1} << 62) || (n != 0 && elements > (std::uint64_t{1} << 62) / n)) dew::fail(context, ": shape is too large");
    elements *= n;
    entry.shape.push_back(static_cast<std::int64_t>(n));
  }
  for (const auto& o : spec["data_offsets"]) {
    if (!o.is_number_unsigned()) dew::fail(context, ": data_offsets must be non-negative integers");
  }
  const auto begin = spec["data_offsets"][0].get<std::uint64_t>();
  const auto end = spec["data_offsets"][1].get<std::uint64_t>();
  if (end < begin || end > data_size) {
    dew::fail(context, ": bytes [", begin, ", ", end, ") lie outside the ", data_size, "-byte data section (truncated file?)");
  }
  entry.begin = static_cast<std::size_t>(begin);
  entry.end = static_cast<std::size_t>(end);
  if (end - begin != elements * element_bytes) {
    dew::fail(context, ": shape ", spec["shape"].dump(), " of ", entry.dtype, " needs ", elements * element_bytes,
              " bytes but data_offsets give ", end - begin);
  }
  return entry;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const std::uint8_t* file, std::size_t size, const std::string& where) {
  SafetensorsHeader out;
  if (size < 8) dew::fail("'", where, "' is not a safetensors file: ", size, " bytes, shorter than the 8-byte header length");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, file, 8);  // little-endian on every platform dew runs on
  if (header_len > kMaxHeaderBytes) dew::fail("'", where, "': header length ", header_len, " exceeds the 100 MB limit (corrupt file?)");
  if (header_len > size - 8) {
    dew::fail("'", where, "': header says ", header_len, " bytes but the file has only ", size - 8, " after the length (truncated?)");
  }
  out.data_start = 8 + header_len;
  const std::size_t data_size = size - out.data_start;
  nlohmann::json header;
  // JSON allows a repeated key (the last one wins); a repeated tensor name is refused instead.
  std::set<std::string> names;
  std::string repeated;
  auto note_keys = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second &&
        repeated.empty()) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  try {
    header = nlohmann::json::parse(file + 8, file + 8 + header_len, note_keys);
  } catch (const nlohmann::json::exception& e) {
    dew::fail("'", where, "': the header is not valid JSON (", e.what(), ")");
  }
  if (!header.is_object()) dew::fail("'", where, "': the header must be a JSON object");
  if (!repeated.empty()) dew::fail("'", where, "' tensor '", repeated, "': appears twice in the header");
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const auto& name = it.key();
    const auto& spec = it.value();
    if (name == "__metadata__") {
      if (!spec.is_object()) dew::fail("'", where, "': __metadata__ must be an object of strings");
      for (auto m = spec.begin(); m != spec.end(); ++m) {
        if (!m.value().is_string()) dew::fail("'", where, "': __metadata__.", m.key(), " must be a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string context = dew::str("'", where, "' tensor '", name, "'");
    SafetensorsEntry entry = parse_entry(spec, data_size, context);
    if (entry.end > entry.begin) ranges.emplace_back(entry.begin, entry.end);
    if (!out.entries.emplace(name, std::move(entry)).second) dew::fail(context, ": appears twice");
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) dew::fail("'", where, "': two tensors' byte ranges overlap at byte ", ranges[i].first);
  }
  return out;
}

}  // namespace dew::formats
