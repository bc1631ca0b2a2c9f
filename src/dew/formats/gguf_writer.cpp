#include "dew/formats/gguf_writer.h"

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/formats/gguf_quants.h"

namespace dew::formats {
namespace {

class Out {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);  // little-endian, as GGUF
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<std::uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void value(const GgufValue& v) {
    switch (v.type) {
      case GgufType::UInt8: put<std::uint8_t>(static_cast<std::uint8_t>(v.as_uint())); break;
      case GgufType::Int8: put<std::int8_t>(static_cast<std::int8_t>(v.as_int())); break;
      case GgufType::UInt16: put<std::uint16_t>(static_cast<std::uint16_t>(v.as_uint())); break;
      case GgufType::Int16: put<std::int16_t>(static_cast<std::int16_t>(v.as_int())); break;
      case GgufType::UInt32: put<std::uint32_t>(static_cast<std::uint32_t>(v.as_uint())); break;
      case GgufType::Int32: put<std::int32_t>(static_cast<std::int32_t>(v.as_int())); break;
      case GgufType::UInt64: put<std::uint64_t>(v.as_uint()); break;
      case GgufType::Int64: put<std::int64_t>(v.as_int()); break;
      case GgufType::Float32: put<float>(static_cast<float>(v.as_float())); break;
      case GgufType::Float64: put<double>(v.as_float()); break;
      case GgufType::Bool: put<std::uint8_t>(v.as_bool() ? 1 : 0); break;
      case GgufType::String: str(v.as_string()); break;
      case GgufType::Array: {
        const auto& elements = v.as_array();
        put<std::uint32_t>(static_cast<std::uint32_t>(v.element_type));
        put<std::uint64_t>(elements.size());
        for (const auto& e : elements) value(e);
        break;
      }
    }
  }
  std::vector<std::uint8_t> bytes;
};

std::uint64_t align_up(std::uint64_t n, std::uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Checks that a value's stored alternative agrees with its declared type, so what is written reads back.
void check_value(const std::string& key, const GgufValue& v) {
  bool ok = false;
  switch (v.type) {
    case GgufType::UInt8: case GgufType::UInt16: case GgufType::UInt32: case GgufType::UInt64:
    case GgufType::Int8: case GgufType::Int16: case GgufType::Int32: case GgufType::Int64: ok = v.is_integer(); break;
    case GgufType::Float32: case GgufType::Float64: ok = std::holds_alternative<double>(v.value); break;
    case GgufType::Bool: ok = std::holds_alternative<bool>(v.value); break;
    case GgufType::String: ok = std::holds_alternative<std::string>(v.value); break;
    case GgufType::Array: {
      const auto* a = std::get_if<std::vector<GgufValue>>(&v.value);
      ok = a != nullptr;
      if (a) {
        for (const auto& e : *a) {
          if (e.type != v.element_type) dew::fail("GGUF key '", key, "': an element is a ", e.type_name(), " in an array of ", gguf_type_name(v.element_type));
          check_value(key, e);
        }
      }
      break;
    }
  }
  if (!ok || static_cast<std::uint32_t>(v.type) > static_cast<std::uint32_t>(GgufType::Float64)) {
    dew::fail("GGUF key '", key, "': the value does not hold a ", gguf_type_name(v.type));
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  if (key.empty()) dew::fail("GGUF metadata keys must not be empty");
  check_value(key, value);
  value.key = key;
  if (key == "general.alignment") {
    if (value.type != GgufType::UInt32) dew::fail("general.alignment must be a uint32, got a ", value.type_name());
    const auto a = value.as_uint();
    if (a == 0 || (a & (a - 1)) != 0) dew::fail("general.alignment ", a, " must be a power of two");
  }
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

std::size_t GgufWriter::alignment() const {
  for (const auto& [k, v] : metadata_) {
    if (k == "general.alignment") return static_cast<std::size_t>(v.as_uint());
  }
  return 32;
}

void GgufWriter::add_tensor(const std::string& name, const at::Tensor& values, GgmlType type) {
  if (name.empty()) dew::fail("GGUF tensor names must not be empty");
  for (const auto& t : tensors_) {
    if (t.name == name) dew::fail("GGUF tensor '", name, "' added twice");
  }
  if (type != GgmlType::F32 && type != GgmlType::F16 && type != GgmlType::Q8_0) {
    dew::fail("GGUF tensor '", name, "': dew writes F32, F16 or Q8_0, not ", ggml_type_name(type));
  }
  if (values.dim() > 4) dew::fail("GGUF tensor '", name, "' has ", values.dim(), " dimensions; GGUF allows at most 4");
  if (!values.is_floating_point()) dew::fail("GGUF tensor '", name, "' must be a floating-point tensor, got ", values.scalar_type());
  Tensor t;
  t.name = name;
  t.type = type;
  auto sizes = values.sizes().vec();
  t.dims.assign(sizes.rbegin(), sizes.rend());
  const std::int64_t row = t.dims.empty() ? 1 : t.dims[0];
  if (row % ggml_block_size(type) != 0) {
    dew::fail("GGUF tensor '", name, "': ", ggml_type_name(type), " needs the last dimension to be a multiple of ",
              ggml_block_size(type), ", got ", row, " (store it as F16 or F32 instead)");
  }
  auto floats = values.detach().to(at::kCPU, at::kFloat).contiguous();
  const std::int64_t count = floats.numel();
  t.bytes.resize(static_cast<std::size_t>(count / ggml_block_size(type) * ggml_block_bytes(type)));
  quantize_row(type, floats.data_ptr<float>(), count, t.bytes.data());
  tensors_.push_back(std::move(t));
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const std::uint64_t alignment = this->alignment();
  Out header;
  header.put<std::uint32_t>(0x46554747);
  header.put<std::uint32_t>(3);
  header.put<std::uint64_t>(tensors_.size());
  header.put<std::uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    header.str(key);
    header.put<std::uint32_t>(static_cast<std::uint32_t>(value.type));
    header.value(value);
  }
  std::uint64_t offset = 0;
  for (const auto& t : tensors_) {
    header.str(t.name);
    header.put<std::uint32_t>(static_cast<std::uint32_t>(t.dims.size()));
    for (auto d : t.dims) header.put<std::uint64_t>(static_cast<std::uint64_t>(d));
    header.put<std::uint32_t>(static_cast<std::uint32_t>(t.type));
    header.put<std::uint64_t>(offset);
    offset += align_up(t.bytes.size(), alignment);
  }
  header.bytes.resize(align_up(header.bytes.size(), alignment), 0);
  AtomicFile file(path);
  file.write(header.bytes.data(), header.bytes.size());
  const std::vector<std::uint8_t> zeros(alignment, 0);
  for (const auto& t : tensors_) {
    file.write(t.bytes.data(), t.bytes.size());
    file.write(zeros.data(), align_up(t.bytes.size(), alignment) - t.bytes.size());  // gguf-py pads the last too
  }
  file.commit();
}

}  // namespace dew::formats
