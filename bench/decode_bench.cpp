// Decode speed of a GGUF decoder (SmolLM2-135M-Instruct by default) through dew::inference::generate:
// load time, prompt (prefill) tokens/s and decode tokens/s, greedy, one prompt. Prints one JSON line;
// bench/decode.sh runs it beside llama.cpp's llama-bench and transformers (tools/bench/decode_peers.py) on
// the same file and prints ratios.
//
//   decode_bench --model FILE.gguf [--new-tokens 128] [--threads 2] [--rounds 3] [--prompt TEXT]
//                [--dtype native|float32|bfloat16] [--kernels auto|scalar|avx2|avx512] [--dequantize-rows N]
//                [--batch B] [--temperature T] [--top-p P]
//
// --dtype: how the weights are held (native: the GGUF's quantized blocks, the inference default);
// --kernels forces an instruction set for the quantized kernels; --dequantize-rows sets the activation
// rows from which a quantized matmul dequantizes tiles for at::mm (prefill) instead of the integer kernels.
//
// One round: generate(max_new_tokens = 1) (prefill + one token), then generate(max_new_tokens = N); the
// decode rate is (N - 1) / (t_N - t_1), the prefill rate prompt_tokens / t_1. Medians over rounds, after
// one warm-up round. EOS does not stop the row (every round makes exactly N tokens).
// --batch B decodes B continuations of the prompt together (the engine's batched decode, as `dew serve`
// runs it with B clients): the decode rate is then the aggregate, B (N - 1) / (t_N - t_1).
// --temperature (default 0: greedy) and --top-p sample instead, row r with seed r, to time sampling too.
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "dew/core/error.h"
#include "dew/inference/generate.h"
#include "dew/interop/gguf_model.h"
#include "dew/nn/quantized_weights.h"

namespace {

using Clock = std::chrono::steady_clock;
using dew::bench::median;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) try {
  std::string model_path, prompt_text = "What is the capital of France?";
  std::int64_t new_tokens = 128, threads = 2, rounds = 3, dequantize_rows = 0, batch = 1;
  std::string dtype = "native", kernels = "auto";
  double temperature = 0.0, top_p = 1.0;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) dew::fail("decode_bench: ", flag, " needs a value");
      return argv[++i];
    };
    if (flag == "--model") model_path = value();
    else if (flag == "--new-tokens") new_tokens = std::stoll(value());
    else if (flag == "--threads") threads = std::stoll(value());
    else if (flag == "--rounds") rounds = std::stoll(value());
    else if (flag == "--prompt") prompt_text = value();
    else if (flag == "--dtype") dtype = value();
    else if (flag == "--kernels") kernels = value();
    else if (flag == "--dequantize-rows") dequantize_rows = std::stoll(value());
    else if (flag == "--batch") batch = std::stoll(value());
    else if (flag == "--temperature") temperature = std::stod(value());
    else if (flag == "--top-p") top_p = std::stod(value());
    else dew::fail("decode_bench: unknown flag ", flag);
  }
  if (model_path.empty()) dew::fail("decode_bench: --model FILE.gguf is required (bash scripts/fetch_models.sh)");
  if (threads > 0) at::set_num_threads(static_cast<int>(threads));

  if (kernels == "scalar") dew::nn::set_quant_kernels(dew::nn::QuantKernels::scalar);
  else if (kernels == "avx2") dew::nn::set_quant_kernels(dew::nn::QuantKernels::avx2);
  else if (kernels == "avx512") dew::nn::set_quant_kernels(dew::nn::QuantKernels::avx512);
  else if (kernels != "auto") dew::fail("decode_bench: --kernels is '", kernels, "'; choose auto, scalar, avx2 or avx512");
  if (dequantize_rows > 0) dew::nn::set_matmul_dequantize_rows(dequantize_rows);
  const auto weights = dew::nn::parse_weight_format(dtype, "--dtype");

  auto start = Clock::now();
  dew::interop::GgufModel m = dew::interop::load_gguf_model(model_path, weights);
  double load_s = seconds_since(start);

  std::vector<std::int32_t> prompt;
  if (m.tokenizer.chat_template) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", prompt_text}}});
    prompt = m.tokenizer.encode(m.tokenizer.render_chat(messages, true));
  } else {
    prompt = m.tokenizer.encode(prompt_text);
  }

  auto run = [&](std::int64_t n) {
    dew::inference::Sampling sampling;
    sampling.temperature = temperature;
    sampling.top_p = top_p;
    sampling.max_new_tokens = n;
    sampling.n = batch;
    auto t = Clock::now();
    auto out = dew::inference::generate(m.model, {prompt}, sampling);
    double s = seconds_since(t);
    if (out.lengths.at(0) != n) dew::fail("decode_bench: generated ", out.lengths.at(0), " tokens, not ", n);
    return s;
  };
  run(new_tokens);  // warm-up: allocator, OpenMP pool, oneDNN kernels
  std::vector<double> prefill, decode;
  for (std::int64_t r = 0; r < rounds; ++r) {
    double t1 = run(1), tn = run(new_tokens);
    prefill.push_back(static_cast<double>(prompt.size()) / t1);
    decode.push_back(static_cast<double>(batch * (new_tokens - 1)) / std::max(tn - t1, 1e-9));
  }
  nlohmann::json line = {{"impl", "dew " + dtype},
                         {"dtype", dtype},
                         {"kernels", dew::nn::quant_kernels_name(dew::nn::active_quant_kernels())},
                         {"quantized_mib", static_cast<double>(dew::nn::quantized_bytes(*m.model)) / (1 << 20)},
                         {"model", model_path},
                         {"threads", at::get_num_threads()},
                         {"prompt_tokens", prompt.size()},
                         {"new_tokens", new_tokens},
                         {"batch", batch},
                         {"temperature", temperature},
                         {"top_p", top_p},
                         {"load_s", load_s},
                         {"prefill_tokens_per_s", median(prefill)},
                         {"decode_tokens_per_s", median(decode)}};
  std::printf("%s\n", line.dump().c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "decode_bench: error: %s\n", e.what());
  return 1;
}
