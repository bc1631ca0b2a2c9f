#pragma once
// How many parameters a decoder of a given config has, without building it (for memory estimates).
#include <cstdint>

#include "dew/nn/causal_transformer_config.h"

namespace dew::nn {

// The number of elements of CausalTransformer(config).parameters(), computed from the config alone.
std::int64_t parameter_count(const CausalTransformerConfig& config);

}  // namespace dew::nn
