#include "dew/nn/kv_cache.h"

namespace dew::nn {

KVCache KVCache::allocate(const CausalTransformerConfig& config, std::int64_t batch, std::int64_t capacity,
                          c10::ScalarType dtype, c10::Device device) {
  KVCache cache;
  auto opts = at::TensorOptions().dtype(dtype).device(device);
  for (std::int64_t i = 0; i < config.num_layers; ++i) {
    cache.keys.push_back(at::zeros({batch, config.resolved_kv_heads(), capacity, config.resolved_head_dim()}, opts));
    cache.values.push_back(at::zeros({batch, config.resolved_kv_heads(), capacity, config.resolved_head_dim()}, opts));
  }
  auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  cache.positions = at::zeros({batch, capacity}, longs);
  cache.segments = at::zeros({batch, capacity}, longs);
  return cache;
}

KVCache KVCache::rows(std::int64_t first, std::int64_t count) const {
  KVCache view;
  for (const auto& k : keys) view.keys.push_back(k.narrow(0, first, count));
  for (const auto& v : values) view.values.push_back(v.narrow(0, first, count));
  view.positions = positions.narrow(0, first, count);
  view.segments = segments.narrow(0, first, count);
  view.span = span;
  return view;
}

}  // namespace dew::nn
