#include "dew/formats/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace dew::formats {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit

struct DtypeInfo {
  const char* name;
  c10::ScalarType type;
  std::size_t bytes;
};

const DtypeInfo kDtypes[] = {
    {"F64", c10::kDouble, 8},         {"F32", c10::kFloat, 4},          {"F16", c10::kHalf, 2},
    {"BF16", c10::kBFloat16, 2},      {"I64", c10::kLong, 8},           {"I32", c10::kInt, 4},
    {"I16", c10::kShort, 2},          {"I8", c10::kChar, 1},            {"U8", c10::kByte, 1},
    {"BOOL", c10::kBool, 1},          {"U16", c10::kUInt16, 2},         {"U32", c10::kUInt32, 4},
    {"U64", c10::kUInt64, 8},         {"F8_E4M3", c10::kFloat8_e4m3fn, 1}, {"F8_E5M2", c10::kFloat8_e5m2, 1},
};

const DtypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

}  // namespace

c10::ScalarType safetensors_dtype(const std::string& name, const std::string& context) {
  const auto* d = find_dtype(name);
  if (!d) dew::fail(context, ": dtype '", name, "' is not a safetensors dtype dew reads");
  return d->type;
}

std::string safetensors_dtype_name(c10::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  dew::fail("tensors of dtype ", c10::toString(type), " cannot be written to safetensors");
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  map_ = std::make_shared<MappedFile>(path);
  const auto where = path.string();
  if (map_->size() < 8) dew::fail("'", where, "' is not a safetensors file: ", map_->size(), " bytes, shorter than the 8-byte header length");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, map_->data(), 8);  // little-endian on every platform dew runs on
  if (header_len > kMaxHeaderBytes) dew::fail("'", where, "': header length ", header_len, " exceeds the 100 MB limit (corrupt file?)");
  if (8 + header_len > map_->size()) {
    dew::fail("'", where, "': header says ", header_len, " bytes but the file has only ", map_->size() - 8, " after the length (truncated?)");
  }
  data_start_ = 8 + header_len;
  const std::size_t data_size = map_->size() - data_start_;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(map_->data() + 8, map_->data() + 8 + header_len);
  } catch (const nlohmann::json::parse_error& e) {
    dew::fail("'", where, "': the header is not valid JSON (", e.what(), ")");
  }
  if (!header.is_object()) dew::fail("'", where, "': the header must be a JSON object");
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const auto& name = it.key();
    const auto& spec = it.value();
    if (name == "__metadata__") {
      if (!spec.is_object()) dew::fail("'", where, "': __metadata__ must be an object of strings");
      for (auto m = spec.begin(); m != spec.end(); ++m) {
        if (!m.value().is_string()) dew::fail("'", where, "': __metadata__.", m.key(), " must be a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto context = dew::str("'", where, "' tensor '", name, "'");
    if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets")) {
      dew::fail(context, ": needs dtype, shape and data_offsets");
    }
    if (!spec["dtype"].is_string() || !spec["shape"].is_array() || !spec["data_offsets"].is_array() ||
        spec["data_offsets"].size() != 2) {
      dew::fail(context, ": dtype must be a string, shape a list, data_offsets a pair");
    }
    SafetensorsEntry entry;
    entry.dtype = spec["dtype"].get<std::string>();
    const auto* info = find_dtype(entry.dtype);
    if (!info) dew::fail(context, ": unknown dtype '", entry.dtype, "'");
    std::uint64_t elements = 1;
    for (const auto& d : spec["shape"]) {
      if (!d.is_number_unsigned()) dew::fail(context, ": shape entries must be non-negative integers, got ", d.dump());
      auto n = d.get<std::uint64_t>();
      if (n != 0 && elements > (std::uint64_t{1} << 62) / n) dew::fail(context, ": shape is too large");
      elements *= n;
      entry.shape.push_back(static_cast<std::int64_t>(n));
    }
    for (const auto& o : spec["data_offsets"]) {
      if (!o.is_number_unsigned()) dew::fail(context, ": data_offsets must be non-negative integers");
    }
    entry.begin = spec["data_offsets"][0].get<std::uint64_t>();
    entry.end = spec["data_offsets"][1].get<std::uint64_t>();
    if (entry.end < entry.begin || entry.end > data_size) {
      dew::fail(context, ": bytes [", entry.begin, ", ", entry.end, ") lie outside the ", data_size, "-byte data section (truncated file?)");
    }
    if (entry.end - entry.begin != elements * info->bytes) {
      dew::fail(context, ": shape ", spec["shape"].dump(), " of ", entry.dtype, " needs ", elements * info->bytes,
                " bytes but data_offsets give ", entry.end - entry.begin);
    }
    ranges.emplace_back(entry.begin, entry.end);
    if (!entries_.emplace(name, std::move(entry)).second) dew::fail(context, ": appears twice");
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) dew::fail("'", where, "': two tensors' byte ranges overlap at byte ", ranges[i].first);
  }
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return entries_.at(a).begin < entries_.at(b).begin; });
  return out;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) dew::fail("'", path_.string(), "' has no tensor '", name, "'");
  return it->second;
}

at::Tensor SafetensorsFile::view(const std::string& name) const {
  const auto& e = entry(name);
  auto type = safetensors_dtype(e.dtype, path_.string());
  void* data = const_cast<std::uint8_t*>(map_->data() + data_start_ + e.begin);
  auto keep = map_;
  if (e.end == e.begin) return at::empty(e.shape, at::TensorOptions().dtype(type));
  return at::from_blob(data, e.shape, [keep](void*) {}, at::TensorOptions().dtype(type));
}

at::Tensor SafetensorsFile::load(const std::string& name, std::optional<c10::ScalarType> dtype) const {
  auto t = view(name);
  return dtype && *dtype != t.scalar_type() ? t.to(*dtype) : t.clone();
}

void save_safetensors(const std::filesystem::path& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> ordered;
  std::size_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__") dew::fail("cannot save a tensor named '", name, "' to '", path.string(), "'");
    auto t = tensor.detach().to(at::kCPU).contiguous();
    auto bytes = static_cast<std::size_t>(t.numel()) * t.element_size();
    header[name] = {{"dtype", safetensors_dtype_name(t.scalar_type())},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    ordered.push_back(t);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  std::uint64_t header_len = text.size();
  AtomicFile file(path);
  file.write(&header_len, 8);
  file.write(text);
  for (const auto& t : ordered) file.write(t.data_ptr(), static_cast<std::size_t>(t.numel()) * t.element_size());
  file.commit();
}

}  // namespace dew::formats
