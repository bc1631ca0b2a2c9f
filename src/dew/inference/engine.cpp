#include "dew/inference/engine.h"

#include <algorithm>
#include <deque>
#include <exception>
#include <map>

#include "dew/core/error.h"
#include "dew/core/machine_memory.h"
#include "dew/inference/request_sampler.h"
#include "dew/inference/slot_cache.h"

namespace dew::inference {

namespace {

constexpr std::int64_t kMaxTopLogprobs = 20;  // OpenAI's limit
constexpr double kMaxPenalty = 2.0;           // OpenAI's range for presence and frequency penalties
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Puts the model in eval mode for one step and restores whatever mode it was in (GRPO's policy trains
// between rollouts).
class EvalMode {
 public:
  explicit EvalMode(nn::CausalTransformer& model) : model_(model), was_training_(model->is_training()) { model_->eval(); }
  ~EvalMode() { model_->train(was_training_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  nn::CausalTransformer& model_;
  bool was_training_;
};

EngineOptions resolved(const nn::CausalTransformerConfig& config, EngineOptions o) {
  if (o.max_batch < 1) dew::fail("engine max_batch is ", o.max_batch, "; use at least 1 request decoding at once");
  if (o.context == 0) o.context = config.max_seq_len;
  if (o.context < 1 || o.context > config.max_seq_len) {
    dew::fail("engine context is ", o.context, "; use 0 (the model's max_seq_len, ", config.max_seq_len,
              ") or a value in [1, ", config.max_seq_len, "]");
  }
  if (o.step_token_budget < 1) dew::fail("engine step_token_budget is ", o.step_token_budget, "; use at least 1 token per step");
  // longrope (rotary.h): a row's keys depend on whether the whole row is longer than the rope boundary, so
  // slots another row computed may have been rotated with the other factors; no prefix is shared.
  if (config.rope_scaling.type == "longrope") o.prefix_cache = false;
  return o;
}

// The KV cache is the engine's one large allocation: refused with numbers before allocating on the CPU
// (the GPU's allocator reports for itself).
void check_cache_memory(const nn::CausalTransformerConfig& config, const EngineOptions& o, c10::ScalarType dtype,
                        const c10::Device& device) {
  if (!device.is_cpu()) return;
  const double bytes = 2.0 * static_cast<double>(config.num_layers) * static_cast<double>(o.max_batch) *
                       static_cast<double>(o.context) *
                       static_cast<double>(config.resolved_kv_heads() * config.resolved_head_dim()) *
                       static_cast<double>(c10::elementSize(dtype));
  const auto memory = available_host_memory();
  if (memory && bytes > static_cast<double>(memory->bytes)) {
    dew::fail("engine: a KV cache of max_batch ", o.max_batch, " slots of context ", o.context, " tokens needs ",
              bytes / kGiB, " GiB, more than the ", static_cast<double>(memory->bytes) / kGiB, " GiB available (",
              memory->source, "); lower max_batch or context");
  }
}

}  // namespace

struct Engine::State {
  struct Request {
    std::int64_t id = 0;
    EngineRequest request;
    EngineCallback callback;
    std::int64_t row = -1;      // cache row while admitted
    std::int64_t cached = 0;    // slots of its row filled: prompt prefilled, then generated tokens fed back
    std::int64_t reused = -1;   // prompt tokens the prefix cache supplied (-1: not looked up yet)
    std::int64_t generated = 0;
    std::int32_t last = 0;      // the newest generated token, which the next decode feeds
    std::optional<RequestSampler> sampler;
    std::vector<EngineToken> prompt_scores;  // prompt_logprobs: filled by prefill, handed over with the first token
    bool finished = false;

    std::int64_t prompt_length() const { return static_cast<std::int64_t>(request.prompt.size()); }
    bool decoding() const { return row >= 0 && !finished && cached >= prompt_length(); }
  };

  State(nn::CausalTransformer& m, EngineOptions o)
      : model(m),
        options(resolved(m->config(), o)),
        device(m->output_weight().device()),
        cache((check_cache_memory(m->config(), options, m->compute_dtype(), device),
               SlotCache(m->config(), options.max_batch, options.context, m->compute_dtype(), device))),
        rows(static_cast<std::size_t>(options.max_batch), nullptr) {
    auto longs = at::TensorOptions().dtype(at::kLong);
    host_decode = at::zeros({2, options.max_batch}, longs);
    host_prefill = at::zeros({2, std::min(options.step_token_budget, options.context)}, longs);
    device_decode = device.is_cpu() ? host_decode : host_decode.to(device);
    device_prefill = device.is_cpu() ? host_prefill : host_prefill.to(device);
  }

  nn::CausalTransformer model;
  EngineOptions options;
  c10::Device device;
  SlotCache cache;
  std::vector<Request*> rows;            // cache row -> the request in it; decoding requests first (compact())
  std::map<std::int64_t, std::unique_ptr<Request>> requests;  // queued or admitted
  std::deque<Request*> waiting;          // first come, first admitted
  std::vector<Request*> prefilling;      // admitted, prompt not all in the cache yet; first come, first filled
  std::int64_t next_id = 1;
  EngineStats totals;
  bool in_step = false;
  std::vector<std::int64_t> finished_in_step;  // erased when the step ends (their callbacks may still be on the stack)
  std::exception_ptr callback_error;           // the first exception a callback threw, rethrown after the step
  // Token ids (row 0) and positions (row 1) of the decode batch and of a prefill chunk: filled on the host,
  // copied once per forward (the same tensors on the CPU), never reallocated.
  at::Tensor host_decode, device_decode, host_prefill, device_prefill;

  std::int64_t running() const {
    return static_cast<std::int64_t>(std::count_if(rows.begin(), rows.end(), [](Request* r) { return r != nullptr; }));
  }

  bool deliver(Request& r, const EngineEvent& event) {
    if (!r.callback) return true;
    try {
      return r.callback(event);
    } catch (...) {
      // The engine's bookkeeping must finish the step: the request ends and the error surfaces afterwards.
      if (!callback_error) callback_error = std::current_exception();
      return false;
    }
  }

  void finish(Request& r, FinishReason reason, std::string error = {}) {
    if (r.finished) return;
    r.finished = true;
    if (r.row >= 0) {
      rows[static_cast<std::size_t>(r.row)] = nullptr;
      r.row = -1;
    } else {
      waiting.erase(std::remove(waiting.begin(), waiting.end(), &r), waiting.end());
    }
    std::erase(prefilling, &r);
    EngineEvent event;
    event.request = r.id;
    event.finish = reason;
    event.error = std::move(error);
    event.prompt_tokens = r.prompt_length();
    event.completion_tokens = r.generated;
    event.cached_prompt_tokens = std::max<std::int64_t>(r.reused, 0);
    const auto id = r.id;
    deliver(r, event);
    if (in_step) {
      finished_in_step.push_back(id);
    } else {
      requests.erase(id);
    }
  }

  void rethrow_callback_error() {
    if (auto e = std::exchange(callback_error, nullptr)) std::rethrow_exception(e);
  }

  // Free rows take waiting requests, lowest row first: a new request lands right after the decode block,
  // where it joins the block without a copy once its prompt is in. The row keeps what it held (a finished
  // request's slots) until the request's prefix lookup has had the chance to reuse it.
  void admit() {
    for (std::size_t row = 0; row < rows.size() && !waiting.empty(); ++row) {
      if (rows[row]) continue;
      Request* r = waiting.front();
      waiting.pop_front();
      rows[row] = r;
      r->row = static_cast<std::int64_t>(row);
      r->cached = 0;
      r->sampler.emplace(r->request.sampling, r->request.presence_penalty, r->request.frequency_penalty, r->request.prompt,
                         model->config().vocab_size, device);
      prefilling.push_back(r);
    }
  }

  // Moves the decoding requests to rows [0, d) (a row copy per request that joins or leaves the block).
  std::int64_t compact() {
    std::int64_t d = 0;
    for (auto* r : rows) d += r && r->decoding() ? 1 : 0;
    std::size_t j = static_cast<std::size_t>(d);
    for (std::size_t i = 0; i < static_cast<std::size_t>(d); ++i) {
      if (rows[i] && rows[i]->decoding()) continue;
      while (!(rows[j] && rows[j]->decoding())) ++j;
      Request* outside = rows[i];  // a request still prefilling, or a free row whose slots the prefix cache keeps
      Request* joining = rows[j];
      cache.swap(static_cast<std::int64_t>(i), static_cast<std::int64_t>(j));
      if (outside) outside->row = static_cast<std::int64_t>(j);
      rows[i] = joining;
      rows[j] = outside;
      joining->row = static_cast<std::int64_t>(i);
      ++j;
    }
    return d;
  }

  // longrope's length for one row's call ([1] on the device), undefined for other models.
  at::Tensor rope_lengths(std::int64_t length) const {
    if (model->config().rope_scaling.type != "longrope") return {};
    return at::full({1}, length, at::TensorOptions().dtype(at::kLong).device(device));
  }

  // longrope: a row whose next token takes it past original_max_position_embeddings had its slots computed
  // with short_factor; they are computed again with long_factor first (one forward over the row's tokens),
  // as transformers' Phi-3 generation drops its cache at that step and runs the whole sequence again.
  void recompute_past_rope_boundary(std::int64_t row, const Request& r) {
    const auto& scaling = model->config().rope_scaling;
    if (scaling.type != "longrope" || r.cached != scaling.original_max_position_embeddings) return;
    const auto& tokens = cache.tokens(row);
    auto longs = at::TensorOptions().dtype(at::kLong);
    auto ids = at::tensor(std::vector<std::int64_t>(tokens.begin(), tokens.end()), longs).view({1, r.cached}).to(device);
    auto positions = at::arange(r.cached, longs.device(device)).view({1, r.cached});
    auto& view = cache.view(row, 1, r.cached);
    model->hidden_states({ids, positions, {}, &view, {}, rope_lengths(r.cached + 1)});
  }

  // One token for each of rows [0, d): their newest token at their own position -> logits [d, vocab].
  at::Tensor decode(std::int64_t d) {
    auto ids = host_decode.accessor<std::int64_t, 2>();
    std::int64_t span = 0;
    for (std::int64_t i = 0; i < d; ++i) recompute_past_rope_boundary(i, *rows[static_cast<std::size_t>(i)]);
    for (std::int64_t i = 0; i < d; ++i) {
      const Request& r = *rows[static_cast<std::size_t>(i)];
      ids[0][i] = r.last;
      ids[1][i] = r.cached;
      span = std::max(span, r.cached + 1);
    }
    if (!device.is_cpu()) device_decode.narrow(1, 0, d).copy_(host_decode.narrow(1, 0, d));
    auto& view = cache.view(0, d, span);
    auto hidden = model->hidden_states({device_decode[0].narrow(0, 0, d).view({d, 1}),
                                        device_decode[1].narrow(0, 0, d).view({d, 1}), {}, &view});
    for (std::int64_t i = 0; i < d; ++i) {
      Request& r = *rows[static_cast<std::size_t>(i)];
      cache.wrote(i, r.cached, &r.last, 1);
      r.cached += 1;
    }
    return model->logits(hidden).squeeze(1);
  }

  // The next `chunk` prompt tokens of `r` in one forward; the last position's logits [1, vocab] once the
  // whole prompt is in, else undefined.
  at::Tensor prefill(Request& r, std::int64_t chunk) {
    auto ids = host_prefill.accessor<std::int64_t, 2>();
    for (std::int64_t j = 0; j < chunk; ++j) {
      ids[0][j] = r.request.prompt[static_cast<std::size_t>(r.cached + j)];
      ids[1][j] = r.cached + j;
    }
    if (!device.is_cpu()) device_prefill.narrow(1, 0, chunk).copy_(host_prefill.narrow(1, 0, chunk));
    auto& view = cache.view(r.row, 1, r.cached + chunk);
    // longrope: every chunk rotates as the whole prompt does (transformers prefills a prompt in one forward).
    auto hidden = model->hidden_states({device_prefill[0].narrow(0, 0, chunk).view({1, chunk}),
                                        device_prefill[1].narrow(0, 0, chunk).view({1, chunk}), {}, &view, {},
                                        rope_lengths(r.prompt_length())});
    if (r.request.prompt_logprobs) score_prompt(r, hidden.squeeze(0), chunk);
    cache.wrote(r.row, r.cached, r.request.prompt.data() + r.cached, chunk);
    r.cached += chunk;
    totals.prompt_tokens += chunk;
    if (r.cached < r.prompt_length()) return {};
    return model->logits(hidden.narrow(1, chunk - 1, 1)).squeeze(1);
  }

  // prompt_logprobs: the log-probability of each prompt token this chunk predicts (positions r.cached ..
  // r.cached + chunk - 1 predict the tokens one further on), with the request's top alternatives. A separate
  // product over the chunk's hidden states, so the last position's logits (what sampling reads) are computed
  // exactly as without scoring.
  void score_prompt(Request& r, const at::Tensor& hidden, std::int64_t chunk) {
    const auto scored = std::min(chunk, r.prompt_length() - 1 - r.cached);  // the last position predicts no prompt token
    if (scored <= 0) return;
    auto logprobs = at::log_softmax(model->logits(hidden.narrow(0, 0, scored).unsqueeze(0)).squeeze(0).to(at::kFloat), -1);
    std::vector<std::int64_t> next(static_cast<std::size_t>(scored));
    for (std::int64_t j = 0; j < scored; ++j) next[static_cast<std::size_t>(j)] = r.request.prompt[static_cast<std::size_t>(r.cached + j + 1)];
    auto targets = at::tensor(next, at::kLong).to(logprobs.device());
    auto chosen = logprobs.gather(1, targets.unsqueeze(1)).squeeze(1).to(at::kCPU).contiguous();
    at::Tensor top_values, top_ids;
    const auto k = std::min<std::int64_t>(r.request.top_logprobs, logprobs.size(1));
    if (k > 0) {
      auto [values, ids] = at::topk(logprobs, k, -1);
      top_values = values.to(at::kCPU).contiguous();
      top_ids = ids.to(at::kCPU).contiguous();
    }
    for (std::int64_t j = 0; j < scored; ++j) {
      EngineToken token;
      token.id = static_cast<std::int32_t>(next[static_cast<std::size_t>(j)]);
      token.logprob = chosen.data_ptr<float>()[j];
      for (std::int64_t t = 0; t < k; ++t) {
        token.top.emplace_back(static_cast<std::int32_t>(top_ids.data_ptr<std::int64_t>()[j * k + t]), top_values.data_ptr<float>()[j * k + t]);
      }
      r.prompt_scores.push_back(std::move(token));
    }
  }

  // One token per producing request: the chosen ids and their log-probabilities, the top alternatives when
  // any request asked for them, and the requests that failed (with why).
  struct Picked {
    at::Tensor chosen, logprob;   // [k] CPU
    at::Tensor top_values, top_ids;  // [k, most asked] CPU; undefined when none asked
    std::vector<std::string> errors;  // "" = fine
  };

  // Greedy requests take the batch's argmax; the others (sampled, or penalised) are filtered together, one
  // pass of the filters per group of equal settings.
  Picked pick(const std::vector<Request*>& produced, const at::Tensor& logits) {
    const auto k = static_cast<std::int64_t>(produced.size());
    auto finite = at::isfinite(logits).all(-1).to(at::kCPU);
    auto finite_at = finite.accessor<bool, 1>();
    auto chosen = logits.argmax(-1);
    Picked out;
    out.errors.resize(static_cast<std::size_t>(k));
    std::vector<RequestSampler*> samplers;
    std::vector<std::int64_t> sampled_rows;
    for (std::int64_t i = 0; i < k; ++i) {
      Request& r = *produced[static_cast<std::size_t>(i)];
      if (!finite_at[i]) {
        out.errors[i] = dew::str("the model produced non-finite logits at step ", r.generated + 1,
                                 " of generation; its weights may hold NaN/Inf");
      } else if (!r.sampler->plain_greedy()) {
        samplers.push_back(&*r.sampler);
        sampled_rows.push_back(i);
      }
    }
    if (!samplers.empty()) {
      try {
        auto rows = at::tensor(sampled_rows, at::kLong).to(logits.device());
        auto picked = RequestSampler::pick_together(samplers, logits.index_select(0, rows));
        auto picked_at = picked.accessor<std::int64_t, 1>();
        for (std::size_t j = 0; j < sampled_rows.size(); ++j) {
          if (picked_at[static_cast<std::int64_t>(j)] < 0) {
            out.errors[sampled_rows[j]] = "the request's filters left no token of positive probability";
          }
        }
        chosen.index_copy_(0, rows, at::clamp_min(picked, 0).to(chosen.device()));
      } catch (const std::exception& e) {
        for (auto i : sampled_rows) out.errors[i] = e.what();
      }
    }
    auto logprobs = at::log_softmax(logits, -1);
    out.chosen = chosen.to(at::kCPU);
    out.logprob = logprobs.gather(1, chosen.unsqueeze(1)).squeeze(1).to(at::kCPU);
    std::int64_t most_top = 0;
    for (auto* r : produced) most_top = std::max(most_top, r->request.top_logprobs);
    if (most_top > 0) {
      auto [values, ids] = at::topk(logprobs, std::min(most_top, logprobs.size(1)), -1);
      out.top_values = values.to(at::kCPU).contiguous();
      out.top_ids = ids.to(at::kCPU).contiguous();
    }
    return out;
  }

  // Row i of `picked` as the token its request reports.
  static EngineToken token_of(const Picked& picked, std::int64_t i, std::int64_t top_logprobs) {
    EngineToken token;
    token.id = static_cast<std::int32_t>(picked.chosen.accessor<std::int64_t, 1>()[i]);
    token.logprob = picked.logprob.accessor<float, 1>()[i];
    const std::int64_t width = picked.top_ids.defined() ? picked.top_ids.size(1) : 0;
    for (std::int64_t t = 0; t < std::min(top_logprobs, width); ++t) {
      token.top.emplace_back(static_cast<std::int32_t>(picked.top_ids.data_ptr<std::int64_t>()[i * width + t]),
                             picked.top_values.data_ptr<float>()[i * width + t]);
    }
    return token;
  }

  // Reports one new token of `r` and ends the request when the token, the length or its consumer says so.
  void settle(Request& r, EngineToken token) {
    r.generated += 1;
    totals.generated_tokens += 1;
    r.sampler->observe(token.id);
    const auto& eos = r.request.sampling.eos_ids;
    const bool at_eos = std::find(eos.begin(), eos.end(), token.id) != eos.end();
    EngineEvent event;
    event.request = r.id;
    event.prompt_tokens = r.prompt_length();
    event.completion_tokens = r.generated;
    event.cached_prompt_tokens = r.reused;
    if (r.generated == 1) event.prompt = std::move(r.prompt_scores);
    r.last = token.id;
    event.token = std::move(token);
    const bool go_on = deliver(r, event);
    if (r.finished) return;  // cancelled by its own callback
    if (at_eos) {
      finish(r, FinishReason::eos);
    } else if (r.generated == r.request.sampling.max_new_tokens) {
      finish(r, FinishReason::length);
    } else if (!go_on) {
      finish(r, FinishReason::stopped);
    }
  }

  // Picks, reports and settles one token for each request in `produced`, whose next-token logits are the
  // rows of `logits` [k, vocab] fp32, in order.
  void emit(const std::vector<Request*>& produced, const at::Tensor& logits) {
    const Picked picked = pick(produced, logits);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(produced.size()); ++i) {
      Request& r = *produced[static_cast<std::size_t>(i)];
      if (r.finished) continue;  // cancelled by an earlier callback of this step
      if (!picked.errors[i].empty()) {
        finish(r, FinishReason::error, picked.errors[i]);
        continue;
      }
      settle(r, token_of(picked, i, r.request.top_logprobs));
    }
  }

  // A forward that threw ends the requests it ran for, with the reason (the step goes on for the others).
  void fail_group(const std::vector<Request*>& group, const std::exception& e) {
    std::string reason = e.what();
    if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) reason = c10_error->what_without_backtrace();
    if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) {
      reason = dew::str("out of memory on ", device, " running ", group.size(), " request(s) (",
                        reason.substr(0, reason.find('\n')), "); lower max_batch, the context or the prompts' length");
    }
    for (auto* r : group) finish(*r, FinishReason::error, reason);
  }

  // The prefix cache, once per request before its first prefill chunk: the longest run of its prompt's first
  // tokens that some row holds is copied into its row (all but the last prompt token at most: the last one's
  // forward gives the logits of the first generated token). Then its row keeps exactly those slots.
  void reuse_prefix(Request& r) {
    r.reused = 0;
    if (options.prefix_cache && !r.request.prompt_logprobs) {
      const auto prefix = cache.longest_prefix(r.request.prompt, r.prompt_length() - 1);
      if (prefix.length > 0) {
        cache.move(prefix.row, r.row, prefix.length);
        r.reused = prefix.length;
      }
    }
    cache.truncate(r.row, r.reused);
    r.cached = r.reused;
    totals.prompt_tokens += r.reused;
    totals.cached_prompt_tokens += r.reused;
  }

  void run_step() {
    // The decoding requests to rows [0, d) first, then waiting requests into the free rows after them.
    const std::int64_t d = compact();
    admit();
    std::vector<Request*> produced;  // the requests whose next-token logits `pieces` hold, in order
    std::vector<at::Tensor> pieces;
    if (d > 0) {
      std::vector<Request*> batch(rows.begin(), rows.begin() + d);
      try {
        pieces.push_back(decode(d));
        produced = batch;
      } catch (const std::exception& e) {
        fail_group(batch, e);
      }
    }
    // Prompts take what the decode tokens leave of the budget, first come first, each chunk one forward.
    std::int64_t budget = std::max<std::int64_t>(0, options.step_token_budget - d);
    // A prompt that another request prefilled whole in this step (n continuations of one prompt, GRPO's
    // groups) is copied from that request's row rather than computed again: the same numbers, no budget.
    std::vector<std::pair<Request*, at::Tensor>> prefilled_whole;
    for (auto* r : std::vector<Request*>(prefilling)) {
      if (r->finished) continue;
      if (r->cached == std::max<std::int64_t>(r->reused, 0)) {
        // A twin that scored its prompt as this request asks (or this one asks for no scores) serves it.
        auto twin = std::find_if(prefilled_whole.begin(), prefilled_whole.end(), [&](const auto& p) {
          const auto& q = p.first->request;
          return q.prompt == r->request.prompt &&
                 (!r->request.prompt_logprobs || (q.prompt_logprobs && q.top_logprobs == r->request.top_logprobs));
        });
        if (twin != prefilled_whole.end()) {
          if (r->request.prompt_logprobs) r->prompt_scores = twin->first->prompt_scores;
          cache.move(twin->first->row, r->row, r->prompt_length());
          totals.prompt_tokens += r->prompt_length() - r->cached;
          totals.cached_prompt_tokens += r->prompt_length() - r->cached;
          r->cached = r->reused = r->prompt_length();
          pieces.push_back(twin->second);
          produced.push_back(r);
          continue;
        }
      }
      if (budget == 0) continue;
      // Looked up as late as possible: the rows prefilled earlier in this step count.
      if (r->reused < 0) reuse_prefix(*r);
      const auto chunk = std::min(budget, r->prompt_length() - r->cached);
      // Its whole prompt after what the prefix cache gave, in this step: later twins copy its row.
      const bool whole = r->cached == r->reused && r->cached + chunk == r->prompt_length();
      try {
        auto logits = prefill(*r, chunk);
        budget -= chunk;
        if (logits.defined()) {
          pieces.push_back(logits);
          produced.push_back(r);
          if (whole) prefilled_whole.emplace_back(r, logits);
        }
      } catch (const std::exception& e) {
        fail_group({r}, e);
      }
    }
    std::erase_if(prefilling, [](Request* r) { return r->finished || r->cached >= r->prompt_length(); });
    if (!produced.empty()) emit(produced, pieces.size() == 1 ? pieces[0] : at::cat(pieces));
    totals.steps += 1;
  }

  void check(const EngineRequest& q) const {
    const auto& config = model->config();
    if (q.prompt.empty()) dew::fail("prompt is empty; a request needs at least one token");
    for (std::size_t j = 0; j < q.prompt.size(); ++j) {
      auto id = q.prompt[j];
      if (id < 0 || id >= config.vocab_size) {
        dew::fail("prompt holds token id ", id, " at index ", j, "; the model's vocabulary is [0, ", config.vocab_size, ")");
      }
    }
    q.sampling.validate();
    if (q.sampling.n != 1) {
      dew::fail("sampling.n is ", q.sampling.n, "; the engine runs one continuation per request: submit n requests ",
                "with seeds seed, seed + 1, ...");
    }
    const auto length = static_cast<std::int64_t>(q.prompt.size());
    // Compared as a difference: length + max_new_tokens overflows for a max_new_tokens near 2^63.
    if (length > options.context || q.sampling.max_new_tokens > options.context - length) {
      dew::fail("prompt has ", length, " tokens and sampling.max_new_tokens is ", q.sampling.max_new_tokens,
                "; together they exceed the engine's context of ", options.context,
                " tokens. Shorten the prompt or lower max_new_tokens");
    }
    for (auto id : q.sampling.eos_ids) {
      if (id < 0 || id >= config.vocab_size) {
        dew::fail("sampling.eos_ids holds ", id, ", outside the model's vocabulary [0, ", config.vocab_size, ")");
      }
    }
    for (auto [name, value] : {std::pair{"presence_penalty", q.presence_penalty}, std::pair{"frequency_penalty", q.frequency_penalty}}) {
      if (!(value >= -kMaxPenalty && value <= kMaxPenalty)) {
        dew::fail(name, " is ", value, "; use a value in [-2, 2] (0 = off)");
      }
    }
    if (q.top_logprobs < 0 || q.top_logprobs > kMaxTopLogprobs) {
      dew::fail("top_logprobs is ", q.top_logprobs, "; use a count in [0, ", kMaxTopLogprobs, "]");
    }
  }
};

Engine::Engine(nn::CausalTransformer& model, EngineOptions options) {
  try {
    state_ = std::make_unique<State>(model, options);
  } catch (const c10::Error& e) {
    std::string reason = e.what_without_backtrace();
    dew::fail("engine: cannot allocate the KV cache of max_batch ", options.max_batch, " slots of context ",
              resolved(model->config(), options).context, " tokens (", reason.substr(0, reason.find('\n')),
              "); lower max_batch or context");
  }
}

Engine::~Engine() = default;

std::int64_t Engine::submit(EngineRequest request, EngineCallback callback) {
  auto& s = *state_;
  s.check(request);
  auto r = std::make_unique<State::Request>();
  r->id = s.next_id++;
  r->request = std::move(request);
  r->callback = std::move(callback);
  s.waiting.push_back(r.get());
  const auto id = r->id;
  s.requests.emplace(id, std::move(r));
  return id;
}

void Engine::cancel(std::int64_t request) {
  auto& s = *state_;
  auto it = s.requests.find(request);
  if (it == s.requests.end() || it->second->finished) return;
  s.finish(*it->second, FinishReason::cancelled);
  if (!s.in_step) s.rethrow_callback_error();
}

bool Engine::step() {
  auto& s = *state_;
  if (s.in_step) dew::fail("Engine::step was called from a request's callback; return from the callback instead");
  if (s.waiting.empty() && s.running() == 0) return false;
  at::NoGradGuard no_grad;
  EvalMode eval_mode(s.model);
  {
    // Whatever leaves the step (an exception from a forward or an allocation), its bookkeeping ends.
    struct EndOfStep {
      State& s;
      explicit EndOfStep(State& state) : s(state) { s.in_step = true; }
      ~EndOfStep() {
        s.in_step = false;
        for (auto id : s.finished_in_step) s.requests.erase(id);
        s.finished_in_step.clear();
      }
    } end_of_step(s);
    s.run_step();
  }
  s.rethrow_callback_error();
  return true;
}

bool Engine::idle() const { return state_->waiting.empty() && state_->running() == 0; }

EngineStats Engine::stats() const {
  EngineStats out = state_->totals;
  out.waiting = static_cast<std::int64_t>(state_->waiting.size());
  out.running = state_->running();
  return out;
}

const nn::CausalTransformerConfig& Engine::config() const { return state_->model->config(); }

}  // namespace dew::inference
