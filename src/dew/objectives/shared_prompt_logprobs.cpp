#include "dew/objectives/shared_prompt_logprobs.h"

#include <algorithm>
#include <vector>

#include "dew/objectives/token_logprobs.h"

namespace dew::objectives {

namespace {

// One prompt and the completions that follow it (token ids).
struct Group {
  std::vector<std::int64_t> prompt;
  std::vector<std::vector<std::int64_t>> completions;
};

// Log-probabilities of every completion token, in order (group by group, completion by completion, token by
// token), fp32 [N], differentiable; nullopt when a shared row would not fit the model.
std::optional<at::Tensor> score_groups(nn::CausalTransformer& model, const std::vector<Group>& groups, std::int64_t chunk_tokens,
                                       double temperature, c10::Device device) {
  const auto B = static_cast<std::int64_t>(groups.size());
  std::int64_t width = 1;
  for (const auto& g : groups) {
    std::int64_t n = static_cast<std::int64_t>(g.prompt.size());
    for (const auto& c : g.completions) n += static_cast<std::int64_t>(c.size());
    width = std::max(width, n);
  }
  if (width > model->config().max_seq_len) return std::nullopt;  // the rows fit one by one, the shared row does not
  // The mask is [B, 1, width, width]: past 64 M entries (a group of 16 x 512-token completions) it would cost
  // more memory than the prompt it saves, so such batches go one row per completion.
  if (B * width * width > (std::int64_t{1} << 26)) return std::nullopt;

  // part: -1 padding, 0 prompt, k + 1 completion k. Keys of the prompt are visible to every completion.
  auto ids = at::zeros({B, width}, at::kLong), positions = at::zeros({B, width}, at::kLong), part = at::full({B, width}, -1, at::kLong);
  auto* id = ids.data_ptr<std::int64_t>();
  auto* pos = positions.data_ptr<std::int64_t>();
  auto* pt = part.data_ptr<std::int64_t>();
  std::vector<std::int64_t> score_slots, targets;  // flat slot into [B * width] whose state scores each target
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& g = groups[static_cast<std::size_t>(b)];
    const auto p = static_cast<std::int64_t>(g.prompt.size());
    std::int64_t slot = b * width;
    for (std::int64_t t = 0; t < p; ++t, ++slot) id[slot] = g.prompt[static_cast<std::size_t>(t)], pos[slot] = t, pt[slot] = 0;
    for (std::size_t k = 0; k < g.completions.size(); ++k) {
      const auto& c = g.completions[k];
      const std::int64_t first = slot;
      for (std::size_t j = 0; j < c.size(); ++j, ++slot) {
        id[slot] = c[j], pos[slot] = p + static_cast<std::int64_t>(j), pt[slot] = static_cast<std::int64_t>(k) + 1;
        // Token j is scored by the state before it: the prompt's last for j = 0, else the completion's j - 1.
        score_slots.push_back(j == 0 ? b * width + p - 1 : first + static_cast<std::int64_t>(j) - 1);
        targets.push_back(c[j]);
      }
    }
  }
  // Query i sees key j <= i of the prompt or of its own completion; padding sees only itself (finite rows).
  const auto query = part.unsqueeze(2), key = part.unsqueeze(1);
  const auto slots = at::arange(width, at::kLong);
  const auto causal = slots.unsqueeze(1).ge(slots.unsqueeze(0)).unsqueeze(0);
  const auto allowed = (causal & query.ne(-1) & key.ne(-1) & (key.eq(0) | key.eq(query))) | at::eye(width, at::kBool).unsqueeze(0);

  nn::DecoderInputs in{ids.to(device), positions.to(device)};
  in.attention_mask = allowed.unsqueeze(1).to(device);
  const auto hidden = model->hidden_states(in);
  const auto scored = hidden.reshape({B * width, hidden.size(-1)}).index_select(0, at::tensor(score_slots, at::kLong).to(device));
  return target_logprobs(scored, model->output_weight(), at::tensor(targets, at::kLong).to(device), model->config().final_logit_softcap,
                         temperature, chunk_tokens);
}

// Row r of ids [R, T] with mask [R, T - 1] split into its prompt (the ids before the first completion target)
// and its completion (the ids the mask marks); false when the marked ids are not one run after a prompt.
bool split_row(const std::int64_t* ids, const float* mask, std::int64_t T, std::vector<std::int64_t>& prompt,
               std::vector<std::int64_t>& completion) {
  std::int64_t first = -1, count = 0;
  for (std::int64_t t = 0; t + 1 < T; ++t) {
    if (mask[t] == 0) continue;
    if (first < 0) first = t;
    if (t != first + count) return false;  // a gap: not one completion
    ++count;
  }
  if (first < 0) return false;
  prompt.assign(ids, ids + first + 1);
  completion.assign(ids + first + 1, ids + first + 1 + count);
  return true;
}

}  // namespace

std::optional<PairLogprobs> shared_prompt_logprobs(nn::CausalTransformer& model, const PairRows& rows, std::int64_t chunk_tokens) {
  // The layout is decided on the host from the (small) id and mask rows.
  const auto chosen = rows.chosen.cpu().contiguous(), rejected = rows.rejected.cpu().contiguous();
  const auto chosen_mask = rows.chosen_mask.to(at::kCPU, at::kFloat).contiguous();
  const auto rejected_mask = rows.rejected_mask.to(at::kCPU, at::kFloat).contiguous();
  const std::int64_t B = chosen.size(0), L = chosen.size(1);
  std::vector<Group> groups(static_cast<std::size_t>(B));
  std::vector<std::int64_t> owner;  // per scored token: b for chosen, B + b for rejected
  for (std::int64_t b = 0; b < B; ++b) {
    auto& g = groups[static_cast<std::size_t>(b)];
    std::vector<std::int64_t> other_prompt, c, r;
    if (!split_row(chosen.data_ptr<std::int64_t>() + b * L, chosen_mask.data_ptr<float>() + b * (L - 1), L, g.prompt, c) ||
        !split_row(rejected.data_ptr<std::int64_t>() + b * L, rejected_mask.data_ptr<float>() + b * (L - 1), L, other_prompt, r) ||
        other_prompt != g.prompt) {
      return std::nullopt;
    }
    owner.insert(owner.end(), c.size(), b);
    owner.insert(owner.end(), r.size(), B + b);
    g.completions = {std::move(c), std::move(r)};
  }
  const auto device = rows.chosen.device();
  const auto logp = score_groups(model, groups, chunk_tokens, 1.0, device);
  if (!logp) return std::nullopt;
  const auto sums = at::zeros({2 * B}, logp->options()).index_add(0, at::tensor(owner, at::kLong).to(device), *logp);
  return PairLogprobs{sums.narrow(0, 0, B), sums.narrow(0, B, B)};
}

std::optional<at::Tensor> shared_prompt_token_logprobs(nn::CausalTransformer& model, const at::Tensor& ids, const at::Tensor& mask,
                                                       std::int64_t group_size, std::int64_t chunk_tokens, double temperature) {
  const auto host_ids = ids.cpu().contiguous();
  const auto host_mask = mask.to(at::kCPU, at::kFloat).contiguous();
  const std::int64_t R = host_ids.size(0), T = host_ids.size(1);
  if (group_size < 1 || R % group_size != 0) return std::nullopt;
  std::vector<Group> groups(static_cast<std::size_t>(R / group_size));
  std::vector<std::int64_t> entries;  // per scored token: its flat index into [R * (T - 1)]
  for (std::int64_t r = 0; r < R; ++r) {
    auto& g = groups[static_cast<std::size_t>(r / group_size)];
    std::vector<std::int64_t> prompt, completion;
    if (!split_row(host_ids.data_ptr<std::int64_t>() + r * T, host_mask.data_ptr<float>() + r * (T - 1), T, prompt, completion)) {
      return std::nullopt;
    }
    if (r % group_size == 0) {
      g.prompt = std::move(prompt);
    } else if (prompt != g.prompt) {
      return std::nullopt;
    }
    const auto first = static_cast<std::int64_t>(g.prompt.size()) - 1;  // the column whose target is the first completion id
    for (std::size_t j = 0; j < completion.size(); ++j) entries.push_back(r * (T - 1) + first + static_cast<std::int64_t>(j));
    g.completions.push_back(std::move(completion));
  }
  const auto logp = score_groups(model, groups, chunk_tokens, temperature, ids.device());
  if (!logp) return std::nullopt;
  const auto index = at::tensor(entries, at::kLong).to(ids.device());
  return at::zeros({R * (T - 1)}, logp->options()).index_put({index}, *logp).reshape({R, T - 1});
}

}  // namespace dew::objectives
