#include "dew/formats/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace dew::formats {
namespace {

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
    {"F8_E8M0", c10::kFloat8_e8m0fnu, 1},
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
  auto header = parse_safetensors_header(map_->data(), map_->size(), path.string());
  data_start_ = header.data_start;
  entries_ = std::move(header.entries);
  metadata_ = std::move(header.metadata);
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

void SafetensorsFile::drop_pages(const std::string& name) const {
  const auto& e = entry(name);
  map_->drop_pages(data_start_ + e.begin, e.end - e.begin);
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
