// The GGUF reader: a bounds-checked cursor over the header, then the tensor table checked against the file.
#include "dew/formats/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <unordered_set>

#include "dew/core/error.h"
#include "dew/core/printable.h"

namespace dew::formats {
namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr std::uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 8;           // real files nest at most once; bounds recursion on bad input
constexpr std::uint64_t kMaxAlignment = 1u << 20;
// Array elements in all metadata together. Each is held as a GgufValue (about 80 bytes), so a file of
// uint8 arrays would otherwise cost 80 times its size in memory; real vocabularies stay near 10^6.
constexpr std::uint64_t kMaxArrayElements = std::uint64_t{1} << 24;

// The smallest number of bytes a value of this type takes, used to bound counts before allocating.
std::uint64_t min_value_bytes(GgufType type) {
  switch (type) {
    case GgufType::UInt8: case GgufType::Int8: case GgufType::Bool: return 1;
    case GgufType::UInt16: case GgufType::Int16: return 2;
    case GgufType::UInt32: case GgufType::Int32: case GgufType::Float32: return 4;
    case GgufType::UInt64: case GgufType::Int64: case GgufType::Float64: case GgufType::String: return 8;
    case GgufType::Array: return 12;
  }
  return 1;
}

class Cursor {
 public:
  Cursor(const std::uint8_t* data, std::size_t size, const std::string& file) : data_(data), size_(size), file_(file) {}

  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return size_ - pos_; }

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // GGUF is little-endian, as is every platform dew runs on
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    auto length = read<std::uint64_t>(what);
    if (length > remaining()) {
      dew::fail("'", file_, "': ", what, " claims ", length, " bytes at offset ", pos_, " but only ", remaining(),
                " remain (truncated or corrupt file)");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(length));
    pos_ += static_cast<std::size_t>(length);
    return s;
  }

  // Refuses a count of items of at least `item_bytes` each that cannot fit in what is left.
  void check_count(std::uint64_t count, std::uint64_t item_bytes, const std::string& what) {
    if (count > remaining() / item_bytes) {
      dew::fail("'", file_, "': ", what, " is ", count, " but only ", remaining(), " bytes remain at offset ", pos_,
                " (truncated or corrupt file)");
    }
  }

 private:
  void need(std::size_t n, const char* what) {
    if (n > remaining()) {
      dew::fail("'", file_, "': the file ends at byte ", size_, " while reading ", what, " (truncated file)");
    }
  }
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  const std::string& file_;
};

struct Budget {
  std::uint64_t array_elements = 0;
};

GgufValue read_value(Cursor& in, GgufType type, const std::string& key, const std::string& file, int depth, Budget& budget);

GgufType read_value_type(Cursor& in, const std::string& key, const std::string& file) {
  auto raw = in.read<std::uint32_t>("a value type");
  if (raw > static_cast<std::uint32_t>(GgufType::Float64)) {
    dew::fail("'", file, "': key '", printable(key), "' has unknown value type ", raw, " (GGUF defines 0 to 12)");
  }
  return static_cast<GgufType>(raw);
}

GgufValue read_array(Cursor& in, const std::string& key, const std::string& file, int depth, Budget& budget) {
  if (depth >= kMaxArrayNesting) dew::fail("'", file, "': key '", printable(key), "' nests arrays deeper than ", kMaxArrayNesting);
  auto element_type = read_value_type(in, key, file);
  auto count = in.read<std::uint64_t>("an array length");
  in.check_count(count, min_value_bytes(element_type), "the length of array '" + printable(key) + "'");
  budget.array_elements += count;
  if (budget.array_elements > kMaxArrayElements) {
    dew::fail("'", file, "': array '", printable(key), "' brings the metadata to more than ", kMaxArrayElements, " array elements");
  }
  std::vector<GgufValue> elements;
  elements.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) elements.push_back(read_value(in, element_type, key, file, depth + 1, budget));
  GgufValue out = GgufValue::array(element_type, std::move(elements));
  out.key = key;
  return out;
}

GgufValue read_value(Cursor& in, GgufType type, const std::string& key, const std::string& file, int depth, Budget& budget) {
  switch (type) {
    case GgufType::UInt8: return GgufValue::uint8(in.read<std::uint8_t>("a uint8"));
    case GgufType::Int8: return GgufValue::int8(in.read<std::int8_t>("an int8"));
    case GgufType::UInt16: return GgufValue::uint16(in.read<std::uint16_t>("a uint16"));
    case GgufType::Int16: return GgufValue::int16(in.read<std::int16_t>("an int16"));
    case GgufType::UInt32: return GgufValue::uint32(in.read<std::uint32_t>("a uint32"));
    case GgufType::Int32: return GgufValue::int32(in.read<std::int32_t>("an int32"));
    case GgufType::UInt64: return GgufValue::uint64(in.read<std::uint64_t>("a uint64"));
    case GgufType::Int64: return GgufValue::int64(in.read<std::int64_t>("an int64"));
    case GgufType::Float32: return GgufValue::float32(in.read<float>("a float32"));
    case GgufType::Float64: return GgufValue::float64(in.read<double>("a float64"));
    case GgufType::Bool: return GgufValue::boolean(in.read<std::uint8_t>("a bool") != 0);
    case GgufType::String: return GgufValue::string(in.read_string("a string value"));
    case GgufType::Array: return read_array(in, key, file, depth, budget);
  }
  dew::fail("'", file, "': key '", printable(key), "' has unknown value type ", static_cast<std::uint32_t>(type));
}

}  // namespace

GgufFile::GgufFile(const std::filesystem::path& path) : name_(path.string()) {
  map_ = std::make_unique<MappedFile>(path);
  bytes_ = map_->data();
  size_ = map_->size();
  parse();
}

GgufFile::GgufFile(std::vector<std::uint8_t> bytes, std::string name) : name_(std::move(name)), owned_(std::move(bytes)) {
  bytes_ = owned_.data();
  size_ = owned_.size();
  parse();
}

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

namespace {

// The magic and the version (2 or 3); the errors say what the file is instead.
std::uint32_t read_version(Cursor& in, const std::uint8_t* bytes, std::size_t size, const std::string& file) {
  if (size < 4) dew::fail("'", file, "' is not a GGUF file: ", size, " bytes, shorter than the magic");
  auto magic = in.read<std::uint32_t>("the magic");
  if (magic != kMagic) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      char c = static_cast<char>(bytes[i]);
      shown += (c >= 32 && c < 127) ? std::string(1, c) : dew::str("\\x", std::hex, static_cast<int>(bytes[i]));
    }
    dew::fail("'", file, "' is not a GGUF file: it starts with '", shown, "', not 'GGUF'");
  }
  const auto version = in.read<std::uint32_t>("the version");
  if (version == 1) dew::fail("'", file, "': GGUF version 1 (32-bit counts) is not supported; re-convert it with a current llama.cpp to version 3");
  if (version != 2 && version != 3) {
    bool swapped = (version & 0xffff) == 0 && version != 0;
    dew::fail("'", file, "': GGUF version ", version, " is not supported (dew reads versions 2 and 3)",
              swapped ? "; this looks like a big-endian GGUF file, which dew does not read" : "");
  }
  return version;
}

std::vector<std::pair<std::string, GgufValue>> read_metadata(Cursor& in, std::uint64_t count, const std::string& file) {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  metadata.reserve(static_cast<std::size_t>(count));
  std::unordered_set<std::string> keys;
  Budget budget;
  for (std::uint64_t i = 0; i < count; ++i) {
    auto key = in.read_string("a metadata key");
    auto type = read_value_type(in, key, file);
    auto value = read_value(in, type, key, file, 0, budget);
    value.key = key;
    if (!keys.insert(key).second) dew::fail("'", file, "': metadata key '", printable(key), "' appears twice");
    metadata.emplace_back(std::move(key), std::move(value));
  }
  return metadata;
}

// One tensor info: name, dimensions, type and data offset, with its byte size (whole blocks per row).
GgufTensorInfo read_tensor_info(Cursor& in, const std::string& file) {
  GgufTensorInfo info;
  info.name = in.read_string("a tensor name");
  const auto where = dew::str("'", file, "' tensor '", printable(info.name), "'");
  auto n_dims = in.read<std::uint32_t>("a tensor's dimension count");
  if (n_dims > kMaxDims) dew::fail(where, ": ", n_dims, " dimensions, GGUF allows at most ", kMaxDims);
  std::uint64_t elements = 1;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    auto n = in.read<std::uint64_t>("a tensor dimension");
    if (n > (std::uint64_t{1} << 62) || (n != 0 && elements > (std::uint64_t{1} << 62) / n)) {
      dew::fail(where, ": dimension ", d, " = ", n, " makes the tensor impossibly large");
    }
    elements *= n;
    info.dims.push_back(static_cast<std::int64_t>(n));
  }
  auto raw_type = in.read<std::uint32_t>("a tensor type");
  if (!ggml_type_known(raw_type)) dew::fail(where, ": unknown ggml type ", raw_type);
  info.type = static_cast<GgmlType>(raw_type);
  info.offset = in.read<std::uint64_t>("a tensor offset");
  const auto block = static_cast<std::uint64_t>(ggml_block_size(info.type));
  const std::uint64_t row = info.dims.empty() ? 1 : static_cast<std::uint64_t>(info.dims[0]);
  if (row % block != 0) {
    dew::fail(where, ": ", ggml_type_name(info.type), " stores blocks of ", block, " elements but its rows (dims[0]) have ", row);
  }
  info.bytes = elements / block * static_cast<std::uint64_t>(ggml_block_bytes(info.type));
  return info;
}

// Every tensor's data aligned, inside the data section, and overlapping no other.
void check_tensor_data(const std::vector<GgufTensorInfo>& tensors, std::size_t alignment, std::uint64_t data_size,
                       const std::string& file) {
  std::vector<std::pair<std::uint64_t, const GgufTensorInfo*>> ranges;
  for (const auto& t : tensors) {
    const auto where = dew::str("'", file, "' tensor '", printable(t.name), "'");
    if (t.offset % alignment != 0) {
      dew::fail(where, ": data offset ", t.offset, " is not a multiple of the alignment ", alignment);
    }
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      dew::fail(where, ": ", t.bytes, " bytes at data offset ", t.offset, " end past the ", data_size,
                "-byte data section (truncated file?)");
    }
    if (t.bytes > 0) ranges.emplace_back(t.offset, &t);
  }
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    const auto* prev = ranges[i - 1].second;
    if (ranges[i].first < prev->offset + prev->bytes) {
      dew::fail("'", file, "': tensors '", printable(prev->name), "' and '", printable(ranges[i].second->name), "' overlap at data offset ",
                ranges[i].first);
    }
  }
}

}  // namespace

void GgufFile::parse() {
  const std::string& file = name_;
  Cursor in(bytes_, size_, file);
  version_ = read_version(in, bytes_, size_, file);
  auto tensor_count = in.read<std::uint64_t>("the tensor count");
  auto kv_count = in.read<std::uint64_t>("the metadata count");
  // A tensor info takes at least 24 bytes (name length, dims count, type, offset); a key-value 13.
  in.check_count(tensor_count, 24, "the tensor count");
  in.check_count(kv_count, 13, "the metadata count");
  metadata_ = read_metadata(in, kv_count, file);

  if (const auto* a = find("general.alignment")) {
    if (!a->is_integer()) dew::fail("'", file, "': general.alignment is a ", a->type_name(), ", expected uint32");
    auto v = a->as_uint();
    if (v == 0 || (v & (v - 1)) != 0 || v > kMaxAlignment) {
      dew::fail("'", file, "': general.alignment ", v, " must be a power of two no larger than ", kMaxAlignment);
    }
    alignment_ = static_cast<std::size_t>(v);
  }

  tensors_.reserve(static_cast<std::size_t>(tensor_count));
  std::unordered_set<std::string> names;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info = read_tensor_info(in, file);
    if (!names.insert(info.name).second) dew::fail("'", file, "' tensor '", printable(info.name), "': appears twice");
    tensors_.push_back(std::move(info));
  }
  data_start_ = (in.position() + alignment_ - 1) / alignment_ * alignment_;
  check_tensor_data(tensors_, alignment_, size_ > data_start_ ? size_ - data_start_ : 0, file);
}

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const GgufValue& GgufFile::at(const std::string& key) const {
  const auto* v = find(key);
  if (!v) dew::fail("'", name_, "' has no metadata key '", printable(key), "'");
  return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const auto* t = find_tensor(name);
  if (!t) dew::fail("'", name_, "' has no tensor '", printable(name), "'");
  return *t;
}

std::span<const std::uint8_t> GgufFile::data(const GgufTensorInfo& info) const {
  if (info.bytes == 0) return {};  // may sit at the very end, where no data section follows
  return {bytes_ + data_start_ + info.offset, static_cast<std::size_t>(info.bytes)};
}

}  // namespace dew::formats
