// Tokenization throughput: encodes a text file with a tokenizer, single-threaded (Tokenizer::encode) and
// on every core (encode_parallel), and prints one JSON line per mode with the median MB/s of the repeats.
// bench/tokenize.sh runs it beside tiktoken and Hugging Face tokenizers on the same text and prints ratios.
//
//   tokenize_bench FILE [TOKENIZER=gpt2] [REPEATS=5]
// TOKENIZER is what load_tokenizer takes, or a .gguf file (the tokenizer its metadata describes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/threads.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "dew/data/tokenizers/tokenizer.h"
#include "dew/formats/gguf_file.h"

namespace {

template <class F>
double median_seconds(int repeats, F&& run) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [TOKENIZER=gpt2] [REPEATS=5]\n", argv[0]);
    return 2;
  }
  try {
    std::string text = dew::read_file(argv[1]);
    std::string spec = argc > 2 ? argv[2] : "gpt2";
    std::unique_ptr<dew::data::Tokenizer> tokenizer;
    if (spec.ends_with(".gguf")) {
      dew::formats::GgufFile file(spec);
      tokenizer = dew::data::gguf_pretrained_tokenizer(dew::data::gguf_tokenizer_metadata(file), spec).tokenizer;
    } else {
      tokenizer = dew::data::load_tokenizer(spec);
    }
    int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
    double mb = text.size() / 1e6;
    int threads = dew::available_threads();

    std::size_t tokens = 0;
    // The first encode fills the piece cache; count it apart so the medians measure steady state, and
    // report the cold pass too since a one-shot `dew tokenize` pays it.
    auto cold_start = std::chrono::steady_clock::now();
    tokens = tokenizer->encode(text).size();
    double cold = std::chrono::duration<double>(std::chrono::steady_clock::now() - cold_start).count();
    double single = median_seconds(repeats, [&] { tokens = tokenizer->encode(text).size(); });
    std::size_t parallel_tokens = 0;
    double parallel = median_seconds(repeats, [&] {
      parallel_tokens = dew::data::encode_parallel(*tokenizer, text, threads).size();
    });
    if (parallel_tokens != tokens) {
      std::fprintf(stderr, "encode_parallel gave %zu tokens, encode %zu\n", parallel_tokens, tokens);
      return 1;
    }
    std::printf("{\"impl\": \"dew\", \"mode\": \"1 thread (first pass)\", \"threads\": 1, \"mb_per_s\": %.2f, \"tokens\": %zu}\n",
                mb / cold, tokens);
    std::printf("{\"impl\": \"dew\", \"mode\": \"1 thread\", \"threads\": 1, \"mb_per_s\": %.2f, \"tokens\": %zu}\n",
                mb / single, tokens);
    std::printf("{\"impl\": \"dew\", \"mode\": \"all threads\", \"threads\": %d, \"mb_per_s\": %.2f, \"tokens\": %zu}\n",
                threads, mb / parallel, tokens);
  } catch (const dew::Error& e) {
    std::fprintf(stderr, "tokenize_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
