// The speed of input paths that commands pay for on every run, measured here rather than asserted in the
// tests (a test on a shared machine can only check behaviour; how fast is a median on a known machine):
//   chat_template    Qwen2.5's chat template (it loops twice and calls several filters) rendering a chat of
//                    10 messages; the claim: well under a millisecond per render
//   gguf_dequantize  4M elements of Q4_1 (SmolLM2-135M's type), Q4_K, Q6_K and F16 blocks to float32, on one
//                    thread and on every thread
//   token_id_scan    the vocabulary check every token loader runs over its split when it opens
//                    (check_ids_in_vocab), on 8 MB of uint16 ids; the claim: about 1 ms per MB
// One JSON line per case and mode, with the median of the repeats. Run from the repository root (the chat
// template is the test fixture's):
//
//   build/bin/input_paths_bench [--reps N] [--only SUBSTRING] [--fixtures DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/chat_templates/chat_template.h"
#include "dew/data/token_files.h"
#include "dew/formats/gguf_file.h"
#include "dew/formats/gguf_quants.h"

namespace {

using Json = nlohmann::ordered_json;

// The median wall time of `reps` calls of `body`, in seconds.
template <class Body>
double median_seconds(int reps, Body&& body) {
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return dew::bench::median(times);
}

void chat_template(const std::filesystem::path& fixtures, int reps) {
  const Json fixture = Json::parse(dew::read_file(fixtures / "chat_templates" / "qwen2_5.json"));
  const dew::data::ChatTemplate chat_template(fixture["template"].get<std::string>(), "qwen2_5");
  Json messages = Json::array();
  messages.push_back({{"role", "system"}, {"content", "You are helpful."}});
  for (int i = 0; i < 9; ++i)
    messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "Message number " + std::to_string(i) + " with some text."}});
  const int renders = 200;  // per repeat: one render is too short to time alone
  std::size_t characters = 0;
  const double seconds = median_seconds(reps, [&] {
    for (int i = 0; i < renders; ++i) characters += chat_template.render(messages, true).size();
  });
  if (characters == 0) dew::fail("the chat template rendered nothing");
  std::printf("{\"case\": \"chat_template\", \"template\": \"qwen2_5\", \"messages\": 10, \"us_per_render\": %.1f}\n",
              seconds / renders * 1e6);
}

void gguf_dequantize(int reps) {
  using dew::formats::GgmlType;
  for (GgmlType type : {GgmlType::Q4_1, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16}) {
    const std::int64_t count = std::int64_t{1} << 22;  // 4M elements, 16 MB of float32 output
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count / dew::formats::ggml_block_size(type) *
                                                             dew::formats::ggml_block_bytes(type)));
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
    std::vector<float> out(static_cast<std::size_t>(count));
    for (int threads : {1, 0}) {
      const double s = median_seconds(reps, [&] { dew::formats::dequantize(type, bytes, count, out.data(), threads); });
      std::printf("{\"case\": \"gguf_dequantize\", \"type\": \"%s\", \"threads\": \"%s\", \"output_mb_per_s\": %.0f, "
                  "\"m_elements_per_s\": %.0f}\n",
                  dew::formats::ggml_type_name(type), threads == 1 ? "1" : "all", count * 4 / s / 1e6, count / s / 1e6);
    }
  }
}

void token_id_scan(int reps) {
  const std::int64_t count = 4'000'000;  // 8 MB of uint16
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count) * 2);
  for (std::int64_t i = 0; i < count; ++i) {
    const auto id = static_cast<std::uint16_t>((i * 7919) % 50000);
    bytes[static_cast<std::size_t>(2 * i)] = static_cast<std::uint8_t>(id & 0xff);
    bytes[static_cast<std::size_t>(2 * i + 1)] = static_cast<std::uint8_t>(id >> 8);
  }
  const dew::data::TokenArray ids(bytes.data(), count, dew::data::TokenDtype::uint16, "in-memory");
  const double s = median_seconds(reps, [&] { dew::data::check_ids_in_vocab(ids, 50257); });
  std::printf("{\"case\": \"token_id_scan\", \"dtype\": \"uint16\", \"mb\": %.0f, \"ms\": %.2f, \"ms_per_mb\": %.3f}\n",
              bytes.size() / 1e6, s * 1e3, s * 1e3 / (bytes.size() / 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::string only;
  std::filesystem::path fixtures = "tests/fixtures";
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", argv[i]);
      return 2;
    }
    if (flag == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--only") only = argv[i + 1];
    else if (flag == "--fixtures") fixtures = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s; usage: %s [--reps N] [--only SUBSTRING] [--fixtures DIR]\n", argv[i], argv[0]);
      return 2;
    }
  }
  auto wanted = [&](const char* name) { return only.empty() || std::string(name).find(only) != std::string::npos; };
  try {
    if (wanted("chat_template")) chat_template(fixtures, reps);
    if (wanted("gguf_dequantize")) gguf_dequantize(reps);
    if (wanted("token_id_scan")) token_id_scan(reps);
  } catch (const dew::Error& e) {
    std::fprintf(stderr, "input_paths_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
