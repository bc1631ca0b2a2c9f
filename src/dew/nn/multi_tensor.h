#pragma once
// Elementwise passes over a list of float32 CPU tensors as one parallel loop. ATen's _foreach_ ops run one
// op per tensor on the CPU, each with its dispatch, its scalar wrapping and its own thread fork: for a model
// of a hundred small parameters (a JEPA ViT, a DiT) the per-tensor overhead of an optimizer step and its
// EMA updates costs more than their arithmetic (5 ms of an 85 ms JEPA step, measured with
// trainer.trace_step).
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace dew::nn {

// Whether every tensor of every list is a defined, contiguous float32 CPU tensor, and the lists pair up:
// equal lengths, and the i-th tensors of all lists have equal numbers of elements.
bool multi_tensor_applies(const std::vector<const std::vector<at::Tensor>*>& lists);

// Calls body(i, begin, end) for ranges [begin, end) of the elements of tensors[i], covering every element of
// every tensor once, in parallel: tasks of about 32 K elements, large tensors split and small ones grouped.
void for_each_chunk(const std::vector<at::Tensor>& tensors, const std::function<void(std::size_t, std::int64_t, std::int64_t)>& body);

// targets[i] += weight * (sources[i] - targets[i]) for all i, with at::lerp's formula (from the other end
// when weight >= 0.5): one parallel pass where multi_tensor_applies holds, at::_foreach_lerp_ elsewhere.
void lerp_each(const std::vector<at::Tensor>& targets, const std::vector<at::Tensor>& sources, double weight);

}  // namespace dew::nn
