// Feeds arbitrary bytes to the safetensors header parser as a whole file. Bad input may only raise
// dew::Error; a header that parses must describe ranges inside the file that do not overlap.
// Seeds: fuzz/seeds/safetensors_header/.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "dew/core/error.h"
#include "dew/formats/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto header = dew::formats::parse_safetensors_header(data, size, "fuzz.safetensors");
    const std::size_t data_size = size - header.data_start;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (const auto& [name, e] : header.entries) {
      if (e.begin > e.end || e.end > data_size) std::abort();
      std::size_t elements = 1;
      for (auto d : e.shape) elements *= static_cast<std::size_t>(d);
      if (elements * dew::formats::safetensors_dtype_bytes(e.dtype) != e.end - e.begin) std::abort();
      volatile std::uint8_t sink = 0;
      for (std::size_t i = e.begin; i < e.end; ++i) sink = sink ^ data[header.data_start + i];  // ASan checks the range
    }
    (void)header.names_in_data_order();
  } catch (const dew::Error&) {
    // Refused with a message: what the parser is for.
  }
  return 0;
}
