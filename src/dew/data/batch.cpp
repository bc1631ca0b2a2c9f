#include "dew/data/batch.h"

#include <ATen/ATen.h>

#include "dew/core/error.h"

namespace dew::data {

const at::Tensor& Batch::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("the batch has no '", name, "' (it has: ", describe(), ")");
  return it->second;
}

std::int64_t Batch::rows() const {
  if (tensors_.empty()) return 0;
  return tensors_.begin()->second.size(0);
}

std::string Batch::describe() const {
  std::string out;
  for (const auto& [name, t] : tensors_) {
    if (!out.empty()) out += ", ";
    out += name + ": " + std::string(c10::toString(t.scalar_type())) + dew::str(t.sizes());
  }
  return out.empty() ? "nothing" : out;
}

}  // namespace dew::data
