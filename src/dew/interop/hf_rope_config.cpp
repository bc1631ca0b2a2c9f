// The rotary fields of a config.json, in either spelling (transformers 5's rope_parameters, or rope_theta,
// rope_scaling and partial_rotary_factor at the top level): hf_rope_config.h.
#include "dew/interop/hf_rope_config.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::interop::detail {

using Json = nlohmann::ordered_json;
using Reader = HfConfigReader;

// A rope_scaling / rope_parameters object -> dew's RopeScaling; `field` names it in errors.
nn::RopeScaling read_rope_scaling(const nlohmann::ordered_json& params, const std::string& field, const std::string& source) {
  nn::RopeScaling scaling;
  if (params.is_null()) return scaling;
  if (!params.is_object()) dew::fail(source, ": ", field, " is ", params.dump(), "; expected an object");
  HfConfigReader r(params, source);
  std::string type = r.has("rope_type") ? r.string("rope_type", "default") : r.string("type", "default");
  double partial = r.number("partial_rotary_factor", 1.0);
  if (partial != 1.0) {
    dew::fail(source, ": ", field, ".partial_rotary_factor is ", partial, "; dew rotates every feature of a head (1.0 only)");
  }
  if (r.has("attention_factor") && r.number("attention_factor") != 1.0) {
    dew::fail(source, ": ", field, ".attention_factor is ", r.number("attention_factor"), "; dew computes 1.0 only");
  }
  if (type == "default") return scaling;
  if (type == "linear") {
    scaling.type = "linear";
    scaling.factor = r.number("factor");
    return scaling;
  }
  if (type == "llama3") {
    scaling.type = "llama3";
    scaling.factor = r.number("factor");
    scaling.low_freq_factor = r.number("low_freq_factor");
    scaling.high_freq_factor = r.number("high_freq_factor");
    scaling.original_max_position_embeddings = r.integer("original_max_position_embeddings");
    return scaling;
  }
  dew::fail(source, ": ", field, ".rope_type is '", type,
            "'; dew computes default, linear and llama3 rotary scaling, and longrope for phi3 only (dynamic, yarn, ... are not supported)");
}

// rope_theta and rope_scaling of one layer type, from either spelling.
Rope read_rope(const Reader& r, const Json& config, const std::string& layer_type, double default_theta,
               const std::string& legacy_theta_field) {
  const Json* params = r.get("rope_parameters");
  if (params && params->is_object() && params->contains(layer_type) && (*params)[layer_type].is_object()) {
    const auto& p = (*params)[layer_type];
    return {Reader(p, r.source()).number("rope_theta", default_theta),
            read_rope_scaling(p, "rope_parameters." + layer_type, r.source())};
  }
  if (params && params->is_object() && params->contains("rope_theta")) {
    return {Reader(*params, r.source()).number("rope_theta", default_theta),
            read_rope_scaling(*params, "rope_parameters", r.source())};
  }
  Rope rope{r.number(legacy_theta_field, default_theta), {}};
  if (legacy_theta_field == "rope_theta") {
    if (const Json* scaling = r.get("rope_scaling")) rope.scaling = read_rope_scaling(*scaling, "rope_scaling", r.source());
    if (r.number("partial_rotary_factor", 1.0) != 1.0) {
      dew::fail(r.source(), ": partial_rotary_factor is ", r.number("partial_rotary_factor"),
                "; dew rotates every feature of a head (1.0 only)");
    }
  }
  return rope;
}

// Takes partial_rotary_factor out of `config` (rope_parameters, rope_scaling or the top level) and returns it,
// for the families that compute partial rotary; read_rope then sees a config without it.
double take_partial_rotary(Json& config) {
  double factor = 1.0;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (config.contains(key) && config[key].is_object() && config[key].contains("partial_rotary_factor")) {
      factor = Reader(config[key], "").number("partial_rotary_factor");
      config[key].erase("partial_rotary_factor");
    }
  }
  if (config.contains("partial_rotary_factor") && !config["partial_rotary_factor"].is_null()) {
    factor = Reader(config, "").number("partial_rotary_factor");
    config.erase("partial_rotary_factor");
  }
  return factor;
}

namespace {

// A list of numbers at params[key], named `field` in errors.
std::vector<double> read_numbers(const Json& params, const std::string& key, const std::string& field, const std::string& source) {
  if (!params.contains(key) || !params[key].is_array()) {
    dew::fail(source, ": ", field, " is ", params.contains(key) ? params[key].dump() : "missing", "; longrope needs a list of numbers");
  }
  std::vector<double> out;
  for (const auto& v : params[key]) {
    if (!v.is_number()) dew::fail(source, ": ", field, " holds ", v.dump(), "; expected numbers");
    out.push_back(v.get<double>());
  }
  return out;
}

}  // namespace

// Phi-3's longrope (rope_type longrope, or su as older configs spell it; transformers' Phi3Config and
// _compute_longrope_parameters), taken out of `config` so read_rope then sees default rotary. Nothing when
// the config has no longrope. Phi3Config always has original_max_position_embeddings (default 4096) and
// transformers gives it priority over the rope object's own; factor defaults to max_position_embeddings /
// original_max_position_embeddings, attention_factor to sqrt(1 + ln factor / ln original) (1 when factor <= 1).
std::optional<nn::RopeScaling> take_longrope(Json& config, const std::string& source) {
  for (const std::string key : {"rope_parameters", "rope_scaling"}) {
    if (!config.contains(key) || !config[key].is_object()) continue;
    Json& p = config[key];
    Reader r(p, source);
    const auto type = r.has("rope_type") ? r.string("rope_type", "") : r.string("type", "");
    if (type != "longrope" && type != "su") continue;
    nn::RopeScaling s;
    s.type = "longrope";
    s.short_factor = read_numbers(p, "short_factor", key + ".short_factor", source);
    s.long_factor = read_numbers(p, "long_factor", key + ".long_factor", source);
    Reader top(config, source);
    s.original_max_position_embeddings =
        top.integer("original_max_position_embeddings", r.integer("original_max_position_embeddings", 4096));
    const double original = static_cast<double>(s.original_max_position_embeddings);
    s.factor = r.number("factor", static_cast<double>(top.integer("max_position_embeddings")) / original);
    s.attention_factor = r.number("attention_factor", s.factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(s.factor) / std::log(original)));
    for (const char* used : {"short_factor", "long_factor", "factor", "attention_factor", "original_max_position_embeddings", "type"}) {
      p.erase(used);
    }
    p["rope_type"] = "default";
    return s;
  }
  return std::nullopt;
}

}  // namespace dew::interop::detail
