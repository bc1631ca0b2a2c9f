#pragma once
// Writes GGUF version 3 files that llama.cpp and gguf-py read (layout in gguf_file.h).
//
// Metadata keeps insertion order (setting a key again replaces its value in place). Tensors are stored in
// the order added, each padded to general.alignment (32 unless set; it must be a power of two), as F32, F16
// or Q8_0 quantized from float32 exactly as gguf-py quantizes. The file is written atomically.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dew/formats/gguf_file.h"

namespace dew::formats {

class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);
  void set_string(const std::string& key, const std::string& value) { set(key, GgufValue::string(value)); }
  void set_uint32(const std::string& key, std::uint32_t value) { set(key, GgufValue::uint32(value)); }
  void set_int32(const std::string& key, std::int32_t value) { set(key, GgufValue::int32(value)); }
  void set_float32(const std::string& key, float value) { set(key, GgufValue::float32(value)); }
  void set_bool(const std::string& key, bool value) { set(key, GgufValue::boolean(value)); }
  void set_strings(const std::string& key, const std::vector<std::string>& values) { set(key, GgufValue::strings(values)); }
  void set_int32s(const std::string& key, const std::vector<std::int32_t>& values) { set(key, GgufValue::int32s(values)); }
  void set_float32s(const std::string& key, const std::vector<float>& values) { set(key, GgufValue::float32s(values)); }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }

  // `values` (any float dtype and device; PyTorch dimension order, at most 4 dims) converted now to `type`:
  // F32, F16 or Q8_0 (whose last dimension must be a multiple of 32). Names must be unique.
  void add_tensor(const std::string& name, const at::Tensor& values, GgmlType type);

  std::size_t alignment() const;
  void write(const std::filesystem::path& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> dims;  // GGUF order
    GgmlType type;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace dew::formats
