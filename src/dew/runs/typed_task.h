#pragma once
// Typed configs for run kinds and their tasks: reading a config JSON as a kind's Config struct, and the
// parts of a family's task interface that follow from holding one.
#include <string>
#include <utility>

#include "dew/core/config.h"

namespace dew::runs {

// Reads a stored or assembled config as a kind's typed Config; errors name `source` and the field.
template <class Config>
Config typed_config(const config::Json& json, const std::string& source) {
  Config typed;
  config::from_json(json, typed, source);
  return typed;
}

// The parts of a family's task interface (Base: DecoderTask, ImageTask) that every task over a typed Config
// answers the same way: its sections, its config as JSON, and a stored config read back in canonical form.
template <class Base, class Config>
class TypedTask : public Base {
 public:
  explicit TypedTask(Config config) : config_(std::move(config)) {}
  const Config& config() const { return config_; }
  decltype(std::declval<Base&>().sections()) sections() override { return config_; }
  config::Json config_json() const override { return config::to_json(config_); }
  config::Json canonical_config(const config::Json& stored, const std::string& source) const override {
    return config::to_json(typed_config<Config>(stored, source));
  }

 protected:
  Config config_;
};

}  // namespace dew::runs
