#pragma once
// The rotary fields of a config.json for config_from_hf (hf_config.cpp): rope_theta and rope_scaling of a layer
// type from either spelling, partial rotary, and Phi-3's longrope. read_rope_scaling is declared in
// hf_config_reader.h, where the masked-diffusion readers also use it.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/interop/hf_config_reader.h"
#include "dew/nn/causal_transformer_config.h"

namespace dew::interop::detail {

// rope_theta and rope_scaling of one layer type.
struct Rope {
  double theta;
  nn::RopeScaling scaling;
};

// From rope_parameters[layer_type], rope_parameters, or the legacy top-level fields (legacy_theta_field is
// rope_theta, or a family's own name such as rope_local_base_freq).
Rope read_rope(const HfConfigReader& r, const nlohmann::ordered_json& config, const std::string& layer_type, double default_theta,
               const std::string& legacy_theta_field);

// Takes partial_rotary_factor out of `config` (rope_parameters, rope_scaling or the top level) and returns it
// (1 when absent), for the families that compute partial rotary; read_rope then sees a config without it.
double take_partial_rotary(nlohmann::ordered_json& config);

// Phi-3's longrope (rope_type longrope or su), taken out of `config` so read_rope then sees default rotary;
// nothing when the config has no longrope.
std::optional<nn::RopeScaling> take_longrope(nlohmann::ordered_json& config, const std::string& source);

}  // namespace dew::interop::detail
