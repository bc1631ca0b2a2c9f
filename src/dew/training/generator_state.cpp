#include "dew/training/generator_state.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>

#include "dew/core/error.h"

namespace dew::training {

std::string cpu_generator_state_hex() {
  const at::Tensor bytes = at::detail::getDefaultCPUGenerator().get_state().contiguous();
  static const char* digits = "0123456789abcdef";
  std::string out;
  const auto* p = bytes.data_ptr<std::uint8_t>();
  for (std::int64_t i = 0; i < bytes.numel(); ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

void restore_cpu_generator_state(const std::string& hex, const std::string& source) {
  if (hex.size() % 2 != 0) fail("'", source, "' field 'rng_state' is not hex");
  auto bytes = at::empty({static_cast<std::int64_t>(hex.size() / 2)}, at::kByte);
  auto* p = bytes.data_ptr<std::uint8_t>();
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    fail("'", source, "' field 'rng_state' is not hex");
  };
  for (std::size_t i = 0; i < hex.size() / 2; ++i) p[i] = static_cast<std::uint8_t>(nibble(hex[2 * i]) * 16 + nibble(hex[2 * i + 1]));
  at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the shared generator
  try {
    generator.set_state(bytes);
  } catch (const c10::Error&) {  // state_from_json checked the size; anything else LibTorch refuses
    fail("'", source, "' field 'rng_state' is not a CPU generator state LibTorch accepts; the checkpoint is damaged");
  }
}

}  // namespace dew::training
