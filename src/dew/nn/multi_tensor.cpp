#include "dew/nn/multi_tensor.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "dew/nn/kernels/lerp.h"

namespace dew::nn {

namespace {

constexpr std::int64_t kChunk = 1 << 15;  // elements a task: ~10 us of a memory-bound pass, well above a fork

}  // namespace

bool multi_tensor_applies(const std::vector<const std::vector<at::Tensor>*>& lists) {
  if (lists.empty()) return false;
  const std::size_t count = lists.front()->size();
  for (const auto* list : lists) {
    if (list->size() != count) return false;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t numel = (*lists.front())[i].defined() ? (*lists.front())[i].numel() : -1;
    for (const auto* list : lists) {
      const at::Tensor& t = (*list)[i];
      if (!t.defined() || !t.device().is_cpu() || t.scalar_type() != at::kFloat || !t.is_contiguous() || t.numel() != numel) return false;
    }
  }
  return true;
}

void for_each_chunk(const std::vector<at::Tensor>& tensors, const std::function<void(std::size_t, std::int64_t, std::int64_t)>& body) {
  struct Range {
    std::size_t tensor;
    std::int64_t begin, end;
  };
  // Tasks of about kChunk elements: large tensors split, small ones grouped, so the threads get equal work.
  std::vector<std::vector<Range>> tasks(1);
  std::int64_t filled = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::int64_t n = tensors[i].numel();
    for (std::int64_t begin = 0; begin < n;) {
      const std::int64_t end = std::min(n, begin + (kChunk - filled));
      tasks.back().push_back({i, begin, end});
      filled += end - begin;
      begin = end;
      if (filled == kChunk) tasks.emplace_back(), filled = 0;
    }
  }
  at::parallel_for(0, static_cast<std::int64_t>(tasks.size()), 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t t = first; t < last; ++t)
      for (const auto& r : tasks[static_cast<std::size_t>(t)]) body(r.tensor, r.begin, r.end);
  });
}

void lerp_each(const std::vector<at::Tensor>& targets, const std::vector<at::Tensor>& sources, double weight) {
  if (multi_tensor_applies({&targets, &sources})) {
    const float w = static_cast<float>(weight);
    for_each_chunk(targets, [&](std::size_t i, std::int64_t begin, std::int64_t end) {
      kernels::lerp(targets[i].data_ptr<float>() + begin, sources[i].data_ptr<float>() + begin, end - begin, w);
    });
  } else {
    std::vector<at::Tensor> t = targets;
    at::_foreach_lerp_(t, sources, weight);
  }
}

}  // namespace dew::nn
