#pragma once
// Additive statistics: every metric is a (sum, count) pair, so micro-batches, evaluation batches and
// processes combine by adding, and the value (sum / count) is the same as for the concatenated batch.
#include <cmath>
#include <map>
#include <string>

namespace dew::objectives {

struct Statistic {
  double sum = 0.0;
  double count = 0.0;
  double mean() const { return count > 0 ? sum / count : std::nan(""); }
};

class Statistics {
 public:
  void add(const std::string& name, double sum, double count) {
    auto& s = values_[name];
    s.sum += sum;
    s.count += count;
  }
  void merge(const Statistics& other) {
    for (const auto& [name, s] : other.values_) add(name, s.sum, s.count);
  }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  double mean(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::nan("") : it->second.mean();
  }
  const std::map<std::string, Statistic>& values() const { return values_; }
  // Means of every statistic, plus perplexity = exp(ce) where a "ce" statistic exists, and
  // perplexity_bound = exp(nelbo) where a masked-diffusion negative ELBO per token exists (an upper bound
  // on the model's perplexity, not comparable with an autoregressive model's exp(ce)).
  std::map<std::string, double> summary() const {
    std::map<std::string, double> out;
    for (const auto& [name, s] : values_) out[name] = s.mean();
    if (has("ce")) out["perplexity"] = std::exp(mean("ce"));
    if (has("nelbo")) out["perplexity_bound"] = std::exp(mean("nelbo"));
    return out;
  }

 private:
  std::map<std::string, Statistic> values_;
};

}  // namespace dew::objectives
