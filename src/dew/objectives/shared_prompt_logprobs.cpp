#include "dew/objectives/shared_prompt_logprobs.h"

#include <algorithm>
#include <vector>

#include "dew/objectives/token_logprobs.h"

namespace dew::objectives {

namespace {

// Which part of the shared row a slot holds; keys of the prompt are visible to both completions.
constexpr std::int64_t kPad = -1, kPrompt = 0, kChosen = 1, kRejected = 2;

}  // namespace

std::optional<PairLogprobs> shared_prompt_logprobs(nn::CausalTransformer& model, const PairRows& rows, std::int64_t chunk_tokens) {
  const auto device = rows.chosen.device();
  // The layout is decided on the host from the (small) id and mask rows.
  const auto chosen = rows.chosen.cpu().contiguous(), rejected = rows.rejected.cpu().contiguous();
  const auto real_c = rows.chosen_segments.ne(0).sum(1).cpu(), real_r = rows.rejected_segments.ne(0).sum(1).cpu();
  const auto comp_c = rows.chosen_mask.ne(0).sum(1).cpu(), comp_r = rows.rejected_mask.ne(0).sum(1).cpu();
  const std::int64_t B = chosen.size(0), L = chosen.size(1);
  const auto* ci = chosen.data_ptr<std::int64_t>();
  const auto* ri = rejected.data_ptr<std::int64_t>();

  struct Pair {
    std::int64_t prompt, chosen, rejected;
  };
  std::vector<Pair> pairs;
  std::int64_t width = 1;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t c = comp_c[b].item<std::int64_t>(), r = comp_r[b].item<std::int64_t>();
    const std::int64_t p = real_c[b].item<std::int64_t>() - c;
    // The masks mark completion targets; a row's ids are its prompt then its completion, right-aligned to
    // the mask. Both rows must agree on the prompt, and the prompt must hold the token that scores the
    // first completion id.
    if (p < 1 || real_r[b].item<std::int64_t>() - r != p || c < 1 || r < 1) return std::nullopt;
    if (!std::equal(ci + b * L, ci + b * L + p, ri + b * L)) return std::nullopt;
    pairs.push_back({p, c, r});
    width = std::max(width, p + c + r);
  }

  if (width > model->config().max_seq_len) return std::nullopt;  // the two rows fit, one shared row does not

  auto ids = at::zeros({B, width}, at::kLong), positions = at::zeros({B, width}, at::kLong);
  auto part = at::full({B, width}, kPad, at::kLong);
  auto* id = ids.data_ptr<std::int64_t>();
  auto* pos = positions.data_ptr<std::int64_t>();
  auto* pt = part.data_ptr<std::int64_t>();
  // Scoring rows (flat slot index into [B * width]) and their targets, chosen completions first.
  std::vector<std::int64_t> slot_of[2], target_of[2], owner_of[2];
  for (std::int64_t b = 0; b < B; ++b) {
    const auto [p, c, r] = pairs[static_cast<std::size_t>(b)];
    const std::int64_t row = b * width;
    for (std::int64_t t = 0; t < p; ++t) id[row + t] = ci[b * L + t], pos[row + t] = t, pt[row + t] = kPrompt;
    for (std::int64_t k = 0; k < c; ++k) id[row + p + k] = ci[b * L + p + k], pos[row + p + k] = p + k, pt[row + p + k] = kChosen;
    for (std::int64_t k = 0; k < r; ++k) {
      id[row + p + c + k] = ri[b * L + p + k], pos[row + p + c + k] = p + k, pt[row + p + c + k] = kRejected;
    }
    // Completion token k is scored by the state before it: the prompt's last for k = 0, else its own k - 1.
    for (std::int64_t k = 0; k < c; ++k) {
      slot_of[0].push_back(row + (k == 0 ? p - 1 : p + k - 1));
      target_of[0].push_back(ci[b * L + p + k]);
      owner_of[0].push_back(b);
    }
    for (std::int64_t k = 0; k < r; ++k) {
      slot_of[1].push_back(row + (k == 0 ? p - 1 : p + c + k - 1));
      target_of[1].push_back(ri[b * L + p + k]);
      owner_of[1].push_back(B + b);
    }
  }
  // Query i sees key j <= i of the prompt or of its own completion; padding sees only itself (finite rows).
  const auto query = part.unsqueeze(2), key = part.unsqueeze(1);
  const auto slots = at::arange(width, at::kLong);
  const auto causal = slots.unsqueeze(1).ge(slots.unsqueeze(0)).unsqueeze(0);
  auto allowed = causal & query.ne(kPad) & (key.eq(kPrompt) | key.eq(query)) & key.ne(kPad);
  allowed = allowed | at::eye(width, at::kBool).unsqueeze(0);

  auto concat = [](const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
    std::vector<std::int64_t> out(a);
    out.insert(out.end(), b.begin(), b.end());
    return at::tensor(out, at::kLong);
  };
  const auto score_slots = concat(slot_of[0], slot_of[1]).to(device), targets = concat(target_of[0], target_of[1]).to(device);
  const auto owners = concat(owner_of[0], owner_of[1]).to(device);

  nn::DecoderInputs in{ids.to(device), positions.to(device)};
  in.attention_mask = allowed.unsqueeze(1).to(device);
  const auto hidden = model->hidden_states(in);
  const auto rows_scored = hidden.reshape({B * width, hidden.size(-1)}).index_select(0, score_slots);
  const auto logp = target_logprobs(rows_scored, model->output_weight(), targets, model->config().final_logit_softcap, 1.0, chunk_tokens);
  const auto sums = at::zeros({2 * B}, logp.options()).index_add(0, owners, logp);
  return PairLogprobs{sums.narrow(0, 0, B), sums.narrow(0, B, B)};
}

}  // namespace dew::objectives
