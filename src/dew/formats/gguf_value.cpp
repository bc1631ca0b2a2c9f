// GGUF's type tables (ggml tensor types, metadata value types) and GgufValue's accessors.
#include <limits>

#include "dew/core/error.h"
#include "dew/core/printable.h"
#include "dew/formats/gguf_file.h"

namespace dew::formats {
namespace {

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;
  std::int64_t block_size, block_bytes;
  bool dequantizable;
};

// Block sizes and bytes as ggml defines them (gguf-py's GGML_QUANT_SIZES).
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {GgmlType::F32, "F32", 1, 4, true},          {GgmlType::F16, "F16", 1, 2, true},
    {GgmlType::Q4_0, "Q4_0", 32, 18, true},      {GgmlType::Q4_1, "Q4_1", 32, 20, true},
    {GgmlType::Q5_0, "Q5_0", 32, 22, true},      {GgmlType::Q5_1, "Q5_1", 32, 24, true},
    {GgmlType::Q8_0, "Q8_0", 32, 34, true},      {GgmlType::Q8_1, "Q8_1", 32, 40, false},
    {GgmlType::Q2_K, "Q2_K", 256, 84, true},     {GgmlType::Q3_K, "Q3_K", 256, 110, true},
    {GgmlType::Q4_K, "Q4_K", 256, 144, true},    {GgmlType::Q5_K, "Q5_K", 256, 176, true},
    {GgmlType::Q6_K, "Q6_K", 256, 210, true},    {GgmlType::Q8_K, "Q8_K", 256, 292, false},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, false}, {GgmlType::IQ2_XS, "IQ2_XS", 256, 74, false},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, false}, {GgmlType::IQ1_S, "IQ1_S", 256, 50, false},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, false}, {GgmlType::IQ3_S, "IQ3_S", 256, 110, false},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82, false},  {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, false},
    {GgmlType::I8, "I8", 1, 1, true},            {GgmlType::I16, "I16", 1, 2, true},
    {GgmlType::I32, "I32", 1, 4, true},          {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::F64, "F64", 1, 8, true},          {GgmlType::IQ1_M, "IQ1_M", 256, 56, false},
    {GgmlType::BF16, "BF16", 1, 2, true},        {GgmlType::TQ1_0, "TQ1_0", 256, 54, false},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66, false},  {GgmlType::MXFP4, "MXFP4", 32, 17, false},
    {GgmlType::NVFP4, "NVFP4", 64, 36, false},   {GgmlType::Q1_0, "Q1_0", 128, 18, false},
};

const GgmlTypeInfo* find_type(GgmlType type) {
  for (const auto& t : kGgmlTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

const GgmlTypeInfo& type_info(GgmlType type) {
  const auto* t = find_type(type);
  if (!t) dew::fail("unknown ggml type ", static_cast<std::uint32_t>(type));
  return *t;
}

const char* const kValueTypeNames[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32",  "float32",
                                       "bool",  "string", "array",  "uint64", "int64", "float64"};

std::string describe_key(const std::string& key) { return key.empty() ? "GGUF value" : "GGUF key '" + printable(key) + "'"; }

}  // namespace

bool ggml_type_known(std::uint32_t value) { return find_type(static_cast<GgmlType>(value)) != nullptr; }
const char* ggml_type_name(GgmlType type) {
  const auto* t = find_type(type);
  return t ? t->name : "unknown";
}
std::int64_t ggml_block_size(GgmlType type) { return type_info(type).block_size; }
std::int64_t ggml_block_bytes(GgmlType type) { return type_info(type).block_bytes; }
bool ggml_type_dequantizable(GgmlType type) {
  const auto* t = find_type(type);
  return t && t->dequantizable;
}

const char* gguf_type_name(GgufType type) {
  auto i = static_cast<std::uint32_t>(type);
  return i < std::size(kValueTypeNames) ? kValueTypeNames[i] : "unknown";
}

std::int64_t GgufTensorInfo::elements() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

GgufValue GgufValue::array(GgufType element_type, std::vector<GgufValue> elements) {
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (elements[i].type != element_type) {
      dew::fail("GGUF array of ", gguf_type_name(element_type), ": element ", i, " is a ", elements[i].type_name());
    }
  }
  GgufValue out = make(GgufType::Array, std::move(elements));
  out.element_type = element_type;
  return out;
}

GgufValue GgufValue::strings(const std::vector<std::string>& values) {
  std::vector<GgufValue> elements;
  elements.reserve(values.size());
  for (const auto& v : values) elements.push_back(string(v));
  return array(GgufType::String, std::move(elements));
}

GgufValue GgufValue::int32s(const std::vector<std::int32_t>& values) {
  std::vector<GgufValue> elements;
  elements.reserve(values.size());
  for (auto v : values) elements.push_back(int32(v));
  return array(GgufType::Int32, std::move(elements));
}

GgufValue GgufValue::float32s(const std::vector<float>& values) {
  std::vector<GgufValue> elements;
  elements.reserve(values.size());
  for (auto v : values) elements.push_back(float32(v));
  return array(GgufType::Float32, std::move(elements));
}

bool GgufValue::is_integer() const {
  return std::holds_alternative<std::uint64_t>(value) || std::holds_alternative<std::int64_t>(value);
}

void GgufValue::wrong_type(const char* wanted) const {
  dew::fail(describe_key(key), " is a ", type_name(), ", expected ", wanted);
}

std::int64_t GgufValue::as_int() const {
  if (const auto* u = std::get_if<std::uint64_t>(&value)) {
    if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      dew::fail(describe_key(key), ": ", *u, " does not fit a signed 64-bit integer");
    }
    return static_cast<std::int64_t>(*u);
  }
  if (const auto* s = std::get_if<std::int64_t>(&value)) return *s;
  wrong_type("an integer");
}

std::uint64_t GgufValue::as_uint() const {
  if (const auto* u = std::get_if<std::uint64_t>(&value)) return *u;
  if (const auto* s = std::get_if<std::int64_t>(&value)) {
    if (*s < 0) dew::fail(describe_key(key), ": ", *s, " is negative, expected a non-negative integer");
    return static_cast<std::uint64_t>(*s);
  }
  wrong_type("a non-negative integer");
}

double GgufValue::as_float() const {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* u = std::get_if<std::uint64_t>(&value)) return static_cast<double>(*u);
  if (const auto* s = std::get_if<std::int64_t>(&value)) return static_cast<double>(*s);
  wrong_type("a number");
}

bool GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  wrong_type("a bool");
}

const std::string& GgufValue::as_string() const {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  wrong_type("a string");
}

const std::vector<GgufValue>& GgufValue::as_array() const {
  if (const auto* a = std::get_if<std::vector<GgufValue>>(&value)) return *a;
  wrong_type("an array");
}

std::vector<std::string> GgufValue::as_strings() const {
  if (type == GgufType::Array && element_type != GgufType::String) wrong_type("an array of strings");
  std::vector<std::string> out;
  const auto& a = as_array();
  out.reserve(a.size());
  for (const auto& v : a) out.push_back(v.as_string());
  return out;
}

std::vector<std::int64_t> GgufValue::as_ints() const {
  std::vector<std::int64_t> out;
  const auto& a = as_array();
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_integer()) wrong_type("an array of integers");
    try {
      out.push_back(a[i].as_int());
    } catch (const dew::Error& e) {
      dew::fail(describe_key(key), " element ", i, ": ", e.what());
    }
  }
  return out;
}

std::vector<double> GgufValue::as_floats() const {
  std::vector<double> out;
  const auto& a = as_array();
  out.reserve(a.size());
  for (const auto& v : a) {
    if (!v.is_float() && !v.is_integer()) wrong_type("an array of numbers");
    out.push_back(v.as_float());
  }
  return out;
}

std::string GgufValue::type_name() const {
  if (type != GgufType::Array) return gguf_type_name(type);
  if (element_type == GgufType::Array) {
    // Nested: name the first inner array's type when there is one.
    const auto* a = std::get_if<std::vector<GgufValue>>(&value);
    return "array[" + (a && !a->empty() ? a->front().type_name() : std::string("array")) + "]";
  }
  return std::string("array[") + gguf_type_name(element_type) + "]";
}

}  // namespace dew::formats
