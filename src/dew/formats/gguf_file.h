#pragma once
// GGUF, llama.cpp's single-file model format (versions 2 and 3), read without LibTorch.
//
// Layout (all little-endian): "GGUF", uint32 version, uint64 tensor count, uint64 metadata count; the
// metadata as (string key, uint32 value type, value); one info per tensor (string name, uint32 dims,
// uint64 dims..., uint32 ggml type, uint64 offset); padding to general.alignment (default 32); the data
// section, where each tensor starts at its offset (a multiple of the alignment). Strings are a uint64
// length and bytes without a terminator. Version 1 used 32-bit counts and lengths and is refused.
//
// Everything is checked when the file is opened, before any allocation that a count in the file sizes:
// a file that opens holds well-formed metadata and tensors whose bytes lie, aligned and disjoint, inside it.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "dew/core/mapped_file.h"

namespace dew::formats {

// ggml's tensor types, with ggml's numbering (gaps are types ggml removed).
enum class GgmlType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};

// True for the numbers above.
bool ggml_type_known(std::uint32_t value);
// "Q4_K", ...; "unknown(99)" is never returned for a GgmlType made from a known number.
const char* ggml_type_name(GgmlType type);
// Elements per block (1 for plain types, 32 for Q4_0, 256 for the K quants) and bytes per block.
std::int64_t ggml_block_size(GgmlType type);
std::int64_t ggml_block_bytes(GgmlType type);
// Whether dequantize_row (gguf_quants.h) converts this type.
bool ggml_type_dequantizable(GgmlType type);

// GGUF metadata value types, with GGUF's numbering.
enum class GgufType : std::uint32_t {
  UInt8 = 0, Int8 = 1, UInt16 = 2, Int16 = 3, UInt32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
  String = 8, Array = 9, UInt64 = 10, Int64 = 11, Float64 = 12,
};
const char* gguf_type_name(GgufType type);  // "uint32", "string", "array", ...

// One metadata value. Integers are held widened (unsigned types as uint64, signed as int64), floats as
// double (float32 converts exactly); `type` says what the file holds and what a writer writes back.
// Accessors refuse a value of the wrong type with an error naming `key` (set by the reader and the writer;
// array elements carry KEY[i]).
struct GgufValue {
  GgufType type = GgufType::UInt8;
  GgufType element_type = GgufType::UInt8;  // arrays only: the type of every element
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string, std::vector<GgufValue>> value;
  std::string key;

  static GgufValue uint8(std::uint8_t v) { return make(GgufType::UInt8, std::uint64_t{v}); }
  static GgufValue int8(std::int8_t v) { return make(GgufType::Int8, std::int64_t{v}); }
  static GgufValue uint16(std::uint16_t v) { return make(GgufType::UInt16, std::uint64_t{v}); }
  static GgufValue int16(std::int16_t v) { return make(GgufType::Int16, std::int64_t{v}); }
  static GgufValue uint32(std::uint32_t v) { return make(GgufType::UInt32, std::uint64_t{v}); }
  static GgufValue int32(std::int32_t v) { return make(GgufType::Int32, std::int64_t{v}); }
  static GgufValue uint64(std::uint64_t v) { return make(GgufType::UInt64, v); }
  static GgufValue int64(std::int64_t v) { return make(GgufType::Int64, v); }
  static GgufValue float32(float v) { return make(GgufType::Float32, double{v}); }
  static GgufValue float64(double v) { return make(GgufType::Float64, v); }
  static GgufValue boolean(bool v) { return make(GgufType::Bool, v); }
  static GgufValue string(std::string v) { return make(GgufType::String, std::move(v)); }
  // Every element must have type `element_type` (checked; an error names the index).
  static GgufValue array(GgufType element_type, std::vector<GgufValue> elements);
  static GgufValue strings(const std::vector<std::string>& values);
  static GgufValue int32s(const std::vector<std::int32_t>& values);
  static GgufValue float32s(const std::vector<float>& values);

  bool is_integer() const;
  bool is_float() const { return type == GgufType::Float32 || type == GgufType::Float64; }
  std::int64_t as_int() const;    // any integer type whose value fits int64
  std::uint64_t as_uint() const;  // any integer type whose value is >= 0
  double as_float() const;        // float32, float64 or any integer type
  bool as_bool() const;
  const std::string& as_string() const;
  const std::vector<GgufValue>& as_array() const;
  // Arrays converted whole; errors name the key and the bad element.
  std::vector<std::string> as_strings() const;
  std::vector<std::int64_t> as_ints() const;
  std::vector<double> as_floats() const;
  // "uint32", or "array[string]" for arrays.
  std::string type_name() const;

 private:
  template <class T>
  static GgufValue make(GgufType type, T v) {
    GgufValue out;
    out.type = type;
    out.value = std::move(v);
    return out;
  }
  [[noreturn]] void wrong_type(const char* wanted) const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::int64_t> dims;  // ggml order: dims[0] varies fastest (PyTorch's shape reversed)
  GgmlType type = GgmlType::F32;
  std::uint64_t offset = 0;  // from the start of the data section
  std::uint64_t bytes = 0;
  std::int64_t elements() const;
};

class GgufFile {
 public:
  explicit GgufFile(const std::filesystem::path& path);  // memory-mapped
  // Parses bytes held in memory (fuzzing, tests); `name` stands for the file in messages.
  GgufFile(std::vector<std::uint8_t> bytes, std::string name);
  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& name() const { return name_; }  // the path, as messages show it
  std::uint32_t version() const { return version_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }  // file order
  const GgufValue* find(const std::string& key) const;  // nullptr when absent
  const GgufValue& at(const std::string& key) const;    // error names the file and key
  std::size_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_start_; }  // where the data section starts in the file

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // file order
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const GgufTensorInfo& tensor(const std::string& name) const;  // error names the file and tensor
  std::span<const std::uint8_t> data(const GgufTensorInfo& info) const;

 private:
  void parse();
  std::string name_;
  std::unique_ptr<MappedFile> map_;
  std::vector<std::uint8_t> owned_;
  const std::uint8_t* bytes_ = nullptr;
  std::size_t size_ = 0;
  std::uint32_t version_ = 0;
  std::size_t alignment_ = 32;
  std::uint64_t data_start_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace dew::formats
