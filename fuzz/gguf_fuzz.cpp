// Feeds arbitrary bytes to the GGUF reader, then dequantizes every tensor it accepts and reads every
// metadata value through its accessors. Bad input may only raise dew::Error. Seeds: fuzz/seeds/gguf/.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "dew/core/error.h"
#include "dew/formats/gguf_file.h"
#include "dew/formats/gguf_quants.h"

namespace {

void touch(const dew::formats::GgufValue& v) {
  try {
    (void)v.type_name();
    if (v.type == dew::formats::GgufType::Array) {
      for (const auto& e : v.as_array()) touch(e);
      (void)v.as_ints();
    } else if (v.type == dew::formats::GgufType::String) {
      (void)v.as_string();
    } else {
      (void)v.as_float();
    }
  } catch (const dew::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    dew::formats::GgufFile file(std::vector<std::uint8_t>(data, data + size), "fuzz.gguf");
    for (const auto& [key, value] : file.metadata()) touch(value);
    for (const auto& info : file.tensors()) {
      auto bytes = file.data(info);
      if (bytes.size() != info.bytes) std::abort();
      if (!dew::formats::ggml_type_dequantizable(info.type) || info.elements() > (1 << 20)) continue;
      std::vector<float> out(static_cast<std::size_t>(info.elements()));
      dew::formats::dequantize(info.type, bytes, info.elements(), out.data(), 1);
    }
  } catch (const dew::Error&) {
    // Refused with a message: what the reader is for.
  }
  return 0;
}
