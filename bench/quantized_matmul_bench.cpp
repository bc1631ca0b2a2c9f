// y = x @ W^T with W held quantized (nn/quantized/) against at::linear on the same W in float32, for
// SmolLM2-135M's matrix shapes: microseconds per call, weight bytes read per second, and the ratio.
// One line per (type, shape, rows of x, kernel set).
//
//   quantized_matmul_bench [--threads 1] [--rows 1,4,37] [--kernels auto|scalar|avx2|avx512|all] [--ms 300]
//                          [--dequantize-rows N]
//
// --dequantize-rows N: from N rows of x on, linear() dequantizes tiles for at::mm (default: the library's
// threshold); 100000 forces the integer kernels for every row count, 1 the dequantizing path.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "dew/core/error.h"
#include "dew/formats/gguf_quants.h"
#include "dew/nn/quantized/quantized_matrix.h"

namespace {

using Clock = std::chrono::steady_clock;
using dew::formats::GgmlType;

// Median microseconds per call of `body`, run for about `ms` milliseconds after a warm-up.
template <class F>
double time_us(F&& body, double ms) {
  for (int i = 0; i < 3; ++i) body();
  std::vector<double> samples;
  auto start = Clock::now();
  while (std::chrono::duration<double, std::milli>(Clock::now() - start).count() < ms || samples.size() < 5) {
    auto t = Clock::now();
    body();
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

// Random weights quantized by formats::quantize_row where it can (Q8_0, BF16); for Q4_x random blocks:
// random nibbles and scales are as valid as a quantizer's output and cost the kernels the same.
dew::nn::QuantizedMatrix random_matrix(GgmlType type, std::int64_t rows, std::int64_t cols) {
  if (type == GgmlType::Q8_0 || type == GgmlType::BF16)
    return dew::nn::QuantizedMatrix::from_float(at::randn({rows, cols}) * 0.05, type);
  const std::int64_t row_bytes = cols / dew::formats::ggml_block_size(type) * dew::formats::ggml_block_bytes(type);
  auto bytes = at::randint(0, 256, {rows * row_bytes}, at::kByte);
  auto* b = bytes.data_ptr<std::uint8_t>();
  const std::int64_t block_bytes = dew::formats::ggml_block_bytes(type), blocks = rows * row_bytes / block_bytes;
  const int halves = type == GgmlType::Q4_0 ? 1 : 2;  // d (and m / dmin) as small positive halves
  for (std::int64_t k = 0; k < blocks; ++k)
    for (int h = 0; h < halves; ++h) {
      const std::uint16_t v = dew::formats::float_to_half(0.001f + 0.01f * static_cast<float>(k % 7));
      std::memcpy(b + k * block_bytes + 2 * h, &v, 2);
    }
  return dew::nn::QuantizedMatrix(type, rows, cols, bytes);
}

}  // namespace

int main(int argc, char** argv) try {
  int threads = 1;
  double ms = 300;
  std::string kernels = "auto";
  std::vector<std::int64_t> row_counts{1, 4, 37};
  std::int64_t dequantize_rows = 0;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) dew::fail("quantized_matmul_bench: ", flag, " needs a value");
      return argv[++i];
    };
    if (flag == "--threads") threads = std::stoi(value());
    else if (flag == "--ms") ms = std::stod(value());
    else if (flag == "--kernels") kernels = value();
    else if (flag == "--dequantize-rows") dequantize_rows = std::stoll(value());
    else if (flag == "--rows") {
      row_counts.clear();
      std::stringstream list(value());
      for (std::string item; std::getline(list, item, ',');) row_counts.push_back(std::stoll(item));
    } else dew::fail("quantized_matmul_bench: unknown flag ", flag);
  }
  at::set_num_threads(threads);
  if (dequantize_rows > 0) dew::nn::set_matmul_dequantize_rows(dequantize_rows);
  std::vector<dew::nn::QuantKernels> sets;
  if (kernels == "all") {
    sets.push_back(dew::nn::QuantKernels::scalar);
    if (dew::nn::detected_quant_kernels() != dew::nn::QuantKernels::scalar) sets.push_back(dew::nn::QuantKernels::avx2);
    if (dew::nn::detected_quant_kernels() == dew::nn::QuantKernels::avx512) sets.push_back(dew::nn::QuantKernels::avx512);
  } else if (kernels == "scalar") sets = {dew::nn::QuantKernels::scalar};
  else if (kernels == "avx2") sets = {dew::nn::QuantKernels::avx2};
  else if (kernels == "avx512") sets = {dew::nn::QuantKernels::avx512};
  else sets = {dew::nn::QuantKernels::automatic};

  struct Shape { const char* name; GgmlType type; std::int64_t rows, cols; };
  const std::vector<Shape> shapes{{"ffn_up", GgmlType::Q4_1, 1536, 576},   {"ffn_down", GgmlType::Q4_1, 576, 1536},
                                  {"attn_k", GgmlType::Q4_1, 192, 576},    {"head", GgmlType::Q8_0, 49152, 576},
                                  {"ffn_up", GgmlType::Q4_0, 1536, 576},   {"ffn_up", GgmlType::Q8_0, 1536, 576},
                                  {"ffn_up", GgmlType::Q4_K, 1536, 768},   {"ffn_up", GgmlType::BF16, 1536, 576}};
  at::NoGradGuard no_grad;
  for (const auto& s : shapes) {
    auto m = random_matrix(s.type, s.rows, s.cols);
    auto w = m.dequantize();
    for (std::int64_t n : row_counts) {
      auto x = at::randn({n, s.cols});
      const double f32_us = time_us([&] { at::linear(x, w); }, ms);
      for (auto k : sets) {
        dew::nn::set_quant_kernels(k);
        const double us = time_us([&] { m.linear(x); }, ms);
        std::printf(
            "{\"matrix\":\"%s\",\"type\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"x_rows\":%lld,\"kernels\":\"%s\","
            "\"us\":%.1f,\"weight_gb_per_s\":%.2f,\"float32_us\":%.1f,\"speedup_vs_float32\":%.2f}\n",
            s.name, dew::formats::ggml_type_name(s.type), static_cast<long long>(s.rows), static_cast<long long>(s.cols),
            static_cast<long long>(n), dew::nn::quant_kernels_name(dew::nn::active_quant_kernels()), us,
            static_cast<double>(m.storage_bytes()) / us / 1e3, f32_us, f32_us / us);
      }
    }
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "quantized_matmul_bench: error: %s\n", e.what());
  return 1;
}
