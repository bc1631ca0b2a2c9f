#include "dew/inference/generate.h"

#include <algorithm>

#include "dew/core/error.h"
#include "dew/core/machine_memory.h"
#include "dew/inference/engine.h"

namespace dew::inference {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Generation generate_checked(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                            const Sampling& sampling);

// A rough upper estimate of the bytes a generation holds at once (KV cache, the prefill's activations and
// the sampler's fp64 copies of the logits), in double so that no product overflows. On the CPU it is
// checked against the machine's memory before anything is allocated: prompts * n rows past it would
// otherwise die in the allocator (or in the OOM killer, with memory overcommitted).
void check_memory(const nn::CausalTransformerConfig& config, std::int64_t rows, std::int64_t longest,
                  const Sampling& sampling, c10::ScalarType dtype, const c10::Device& device) {
  if (!device.is_cpu()) return;  // the GPU's own allocator reports what does not fit (see generate())
  const double element = static_cast<double>(c10::elementSize(dtype));
  const double r = static_cast<double>(rows), capacity = static_cast<double>(longest + sampling.max_new_tokens);
  const double kv = 2.0 * static_cast<double>(config.num_layers) * r * capacity *
                    static_cast<double>(config.resolved_kv_heads() * config.resolved_head_dim()) * element;
  const double prefill = r * static_cast<double>(longest) * element *
                         static_cast<double>(4 * config.emb_features + 3 * config.resolved_mlp_features() +
                                             config.num_heads * (longest + sampling.max_new_tokens));
  const double logits = r * static_cast<double>(config.vocab_size) * 8.0 * 6.0;
  const double total = kv + prefill + logits;
  const auto memory = available_host_memory();
  if (memory && total > static_cast<double>(memory->bytes)) {
    dew::fail("generate: ", rows, " rows (prompts times sampling.n = ", sampling.n, ") of up to ",
              longest + sampling.max_new_tokens, " tokens need about ", total / kGiB, " GiB (KV cache ", kv / kGiB,
              " GiB), more than the ", static_cast<double>(memory->bytes) / kGiB, " GiB available (", memory->source,
              "); lower n, max_new_tokens or the number of prompts");
  }
}

}  // namespace

void check_generation_request(const nn::CausalTransformerConfig& config, const std::vector<std::vector<std::int32_t>>& prompts,
                   const Sampling& sampling) {
  sampling.validate();
  if (prompts.empty()) dew::fail("generate: no prompts given; pass at least one prompt of at least one token");
  std::size_t longest = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) dew::fail("generate: prompt ", i, " is empty; a prompt needs at least one token");
    for (std::size_t j = 0; j < prompts[i].size(); ++j) {
      auto id = prompts[i][j];
      if (id < 0 || id >= config.vocab_size) {
        dew::fail("generate: prompt ", i, " holds token id ", id, " at index ", j, "; the model's vocabulary is [0, ",
                  config.vocab_size, ")");
      }
    }
    if (prompts[i].size() > prompts[longest].size()) longest = i;
  }
  auto length = static_cast<std::int64_t>(prompts[longest].size());
  // Compared as a difference: length + max_new_tokens overflows for a max_new_tokens near 2^63.
  if (sampling.max_new_tokens > config.max_seq_len - length) {
    dew::fail("generate: prompt ", longest, " has ", length, " tokens and max_new_tokens is ", sampling.max_new_tokens,
              "; together they exceed the model's max_seq_len of ", config.max_seq_len,
              ". Shorten the prompt or lower max_new_tokens");
  }
  for (auto id : sampling.eos_ids) {
    if (id < 0 || id >= config.vocab_size) {
      dew::fail("sampling.eos_ids holds ", id, ", outside the model's vocabulary [0, ", config.vocab_size, ")");
    }
  }
}


Generation generate(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                    const Sampling& sampling) {
  const auto& config = model->config();
  check_generation_request(config, prompts, sampling);
  std::int64_t longest_prompt = 0;
  for (const auto& p : prompts) longest_prompt = std::max(longest_prompt, static_cast<std::int64_t>(p.size()));
  check_memory(config, static_cast<std::int64_t>(prompts.size()) * sampling.n, longest_prompt, sampling,
               model->compute_dtype(), model->output_weight().device());
  try {
    return generate_checked(model, prompts, sampling);
  } catch (const c10::OutOfMemoryError& e) {
    dew::fail("generate: out of memory on ", model->output_weight().device(), " for ", prompts.size(), " prompts times ",
              sampling.n, " continuations of up to ", longest_prompt + sampling.max_new_tokens,
              " tokens; lower n, max_new_tokens or the number of prompts");
  }
}

namespace {

// generate() once the request is known to be valid: every row a request of the step engine, all decoding
// at once (max_batch = rows, the cache sized for the longest prompt plus max_new_tokens, a budget that
// prefills every prompt in the first step), so the one decoding path is the engine's.
Generation generate_checked(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                            const Sampling& sampling) {
  const std::int64_t n = sampling.n, rows = static_cast<std::int64_t>(prompts.size()) * n;
  std::int64_t longest = 0, prompt_tokens = 0;
  for (const auto& p : prompts) {
    longest = std::max(longest, static_cast<std::int64_t>(p.size()));
    prompt_tokens += static_cast<std::int64_t>(p.size()) * n;
  }
  EngineOptions options;
  options.max_batch = rows;
  options.context = longest + sampling.max_new_tokens;
  options.step_token_budget = prompt_tokens + rows;
  Engine engine(model, options);

  Generation out;
  out.n = n;
  out.tokens.resize(rows);
  out.logprobs.resize(rows);
  out.stopped_at_eos.assign(rows, false);
  std::string error;
  for (std::int64_t row = 0; row < rows; ++row) {
    EngineRequest request;
    request.prompt = prompts[static_cast<std::size_t>(row / n)];
    request.sampling = sampling;
    request.sampling.n = 1;
    // Row r draws from seed + r: a row's tokens depend on its own seed alone (and the row numbering
    // keeps a one-row generation on the seed it was given).
    request.sampling.seed = sampling.seed + static_cast<std::uint64_t>(row);
    const auto r = static_cast<std::size_t>(row);
    engine.submit(std::move(request), [&out, &error, r](const EngineEvent& event) {
      if (event.token) {
        out.tokens[r].push_back(event.token->id);
        out.logprobs[r].push_back(event.token->logprob);
      } else if (event.finish == FinishReason::eos) {
        out.stopped_at_eos[r] = true;
      } else if (event.finish == FinishReason::error && error.empty()) {
        error = event.error;
      }
      return true;
    });
  }
  engine.run_until_idle();
  if (!error.empty()) dew::fail("generate: ", error);
  for (const auto& t : out.tokens) out.lengths.push_back(static_cast<std::int64_t>(t.size()));
  return out;
}

}  // namespace

}  // namespace dew::inference
