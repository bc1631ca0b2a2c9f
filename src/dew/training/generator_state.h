#pragma once
// The CPU generator's state as state.json keeps it (lowercase hex of LibTorch's state bytes): the stream
// objectives draw noise from on the CPU, saved with each checkpoint and set again on resume.
#include <string>

namespace dew::training {

std::string cpu_generator_state_hex();
// Sets the shared CPU generator from `hex`; errors name `source` (the state.json) and the field.
void restore_cpu_generator_state(const std::string& hex, const std::string& source);

}  // namespace dew::training
