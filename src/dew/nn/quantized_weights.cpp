#include "dew/nn/quantized_weights.h"

#include <set>

#include "dew/core/error.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/layers.h"

namespace dew::nn {
namespace {

// The module's weight slot and quantized slot, for the two kinds of module that can hold a matrix.
struct MatrixSlot {
  at::Tensor* weight = nullptr;
  std::shared_ptr<const QuantizedMatrix>* quantized = nullptr;
};

MatrixSlot slot_of(torch::nn::Module& module) {
  if (auto* linear = dynamic_cast<LinearImpl*>(&module)) return {&linear->weight, &linear->quantized};
  if (auto* embedding = dynamic_cast<EmbeddingImpl*>(&module)) return {&embedding->weight, &embedding->quantized};
  return {};
}

void release(at::Tensor& weight) {
  at::NoGradGuard no_grad;
  weight.set_data(at::empty({0}, weight.options()));
  weight.set_requires_grad(false);
}

}  // namespace

WeightFormat parse_weight_format(const std::string& text, const std::string& field) {
  if (text == "native") return WeightFormat::native;
  if (text == "float32") return WeightFormat::float32;
  if (text == "bfloat16") return WeightFormat::bfloat16;
  dew::fail(field, " is '", text, "'; choose native (a GGUF's own quantized types), float32 or bfloat16");
}

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::native: return "native";
    case WeightFormat::float32: return "float32";
    case WeightFormat::bfloat16: return "bfloat16";
  }
  return "?";
}

void hold_quantized(torch::nn::Module& root, const std::string& parameter, std::shared_ptr<const QuantizedMatrix> matrix) {
  const std::string suffix = ".weight";
  if (parameter.size() <= suffix.size() || parameter.compare(parameter.size() - suffix.size(), suffix.size(), suffix) != 0)
    dew::fail("parameter '", parameter, "' is not a weight; only linear and embedding weights can be held quantized");
  const std::string path = parameter.substr(0, parameter.size() - suffix.size());
  std::shared_ptr<torch::nn::Module> module;
  for (const auto& item : root.named_modules()) {
    if (item.key() == path) module = item.value();
  }
  MatrixSlot slot = module ? slot_of(*module) : MatrixSlot{};
  if (!slot.weight) dew::fail("parameter '", parameter, "' does not belong to a linear or embedding layer; it cannot be held quantized");
  if (slot.weight->numel() != 0 && (slot.weight->dim() != 2 || slot.weight->size(0) != matrix->rows() || slot.weight->size(1) != matrix->cols()))
    dew::fail("'", parameter, "' has shape ", slot.weight->sizes(), " but the quantized matrix is [", matrix->rows(), ", ",
              matrix->cols(), "]");
  release(*slot.weight);
  *slot.quantized = std::move(matrix);
}

std::int64_t quantize_matrices(torch::nn::Module& root, formats::GgmlType type) {
  std::int64_t converted = 0;
  for (const auto& item : root.named_modules()) {
    MatrixSlot slot = slot_of(*item.value());
    if (!slot.weight || *slot.quantized || slot.weight->numel() == 0) continue;
    if (!slot.weight->device().is_cpu())
      dew::fail("'", item.key(), ".weight' is on ", slot.weight->device().str(), "; quantized weights live on the CPU");
    *slot.quantized = std::make_shared<const QuantizedMatrix>(QuantizedMatrix::from_float(*slot.weight, type, item.key() + ".weight"));
    release(*slot.weight);
    ++converted;
  }
  return converted;
}

std::int64_t quantized_bytes(torch::nn::Module& root) {
  std::set<const QuantizedMatrix*> seen;
  std::int64_t total = 0;
  for (const auto& item : root.named_modules()) {
    MatrixSlot slot = slot_of(*item.value());
    if (slot.quantized && *slot.quantized && seen.insert(slot.quantized->get()).second) total += (*slot.quantized)->storage_bytes();
  }
  return total;
}

}  // namespace dew::nn
