#pragma once
// A batch is a set of named tensors: text, text_segment_ids, text_positions, text_roles, image, ...
// Objectives read the names they need; loaders produce them. Names follow the spec's Batch fields.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace dew::data {

class Batch {
 public:
  void set(const std::string& name, at::Tensor tensor) { tensors_[name] = std::move(tensor); }
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  // The tensor called `name`; the error lists the names the batch has.
  const at::Tensor& get(const std::string& name) const;
  const std::map<std::string, at::Tensor>& tensors() const { return tensors_; }
  // Number of rows (the leading dimension shared by every tensor).
  std::int64_t rows() const;
  // "text: int64[8, 257], text_positions: ..." for logs and error messages.
  std::string describe() const;

 private:
  std::map<std::string, at::Tensor> tensors_;
};

}  // namespace dew::data
