#pragma once
// The one shape of every tokenizer.json component reader (normalizers, pre-tokenizers, decoders,
// post-processors): a table of rows keyed by the JSON "type", and "Sequence" rows that read a list of the
// same kind. An unknown type is refused naming the supported ones (JsonFields::unknown_type).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/core/error.h"
#include "dew/data/tokenizers/json_fields.h"

namespace dew::data {

template <class Ptr>
using ComponentReader = Ptr (*)(const JsonFields&, const nlohmann::json&, const std::string&);

template <class Ptr>
struct ComponentRow {
  const char* type;
  ComponentReader<Ptr> read;
};

// The row whose type the node names, read.
template <class Ptr>
Ptr read_component(const std::vector<ComponentRow<Ptr>>& table, const JsonFields& fields,
                   const nlohmann::json& node, const std::string& where) {
  const std::string type = fields.type(node, where);
  std::vector<std::string> names;
  for (const auto& row : table) {
    if (type == row.type) return row.read(fields, node, where);
    names.emplace_back(row.type);
  }
  fields.unknown_type(where, type, names);
}

// A Sequence's members: the array at node[key], each read with read_one (errors name "where.key[i]").
template <class Ptr>
std::vector<Ptr> read_component_list(const JsonFields& fields, const nlohmann::json& node, const char* key,
                                     const std::string& where, ComponentReader<Ptr> read_one) {
  const std::string field = where + "." + key;
  const nlohmann::json& list = fields.array(fields.need(node, key, field), field);
  std::vector<Ptr> out;
  for (std::size_t i = 0; i < list.size(); ++i) out.push_back(read_one(fields, list[i], str(field, "[", i, "]")));
  return out;
}

}  // namespace dew::data
