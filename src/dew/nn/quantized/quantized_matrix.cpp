#include "dew/nn/quantized/quantized_matrix.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "dew/core/error.h"
#include "dew/formats/gguf_quants.h"
#include "dew/nn/kernels/cpu_isa.h"
#include "dew/nn/kernels/quant_dot.h"

namespace dew::nn {
namespace {

using formats::GgmlType;

namespace quant = kernels::quant;
using kernels::CpuIsa;

// The table for instruction set `isa`: the AVX-512 one needs VNNI besides x86-64-v4.
QuantKernels quant_kernels_at(CpuIsa isa) {
  if (isa == CpuIsa::avx512 && kernels::cpu_has_avx512_vnni()) return QuantKernels::avx512;
  return isa == CpuIsa::baseline ? QuantKernels::scalar : QuantKernels::avx2;
}

// Measured (bench/quantized_matmul_bench, docs/benchmarks.md, AMD EPYC, AVX-512 VNNI, one thread): the
// integer kernels beat dequantized tiles + at::mm up to 128 rows of x (SmolLM2's ffn_up Q4_1: 2.47 vs 2.81 ms
// at 128 rows), the tiles win at 512 (9.6 vs 10.5 ms).
constexpr std::int64_t kDefaultDequantizeRows = 256;

std::atomic<std::int64_t> dequantize_rows_threshold{kDefaultDequantizeRows};

const quant::KernelTable& kernel_table() {
  switch (active_quant_kernels()) {
    case QuantKernels::avx512: return *quant::avx512_kernels();
    case QuantKernels::avx2: return *quant::avx2_kernels();
    default: return quant::scalar_kernels();
  }
}

quant::DotRows dot_for(const quant::KernelTable& t, GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return t.q8_0;
    case GgmlType::Q4_0: return t.q4_0;
    case GgmlType::Q4_1: return t.q4_1;
    case GgmlType::Q4_K: return t.q4_k;
    case GgmlType::BF16: return t.bf16;
    default: return nullptr;
  }
}

// One activation row in the layout nn/kernels/quant_dot.h describes; buffers reused across calls on a thread.
struct ActBuffers {
  std::vector<std::int8_t> q, q_pair;
  std::vector<std::uint8_t> q_biased;
  std::vector<float> d, dsum;
  std::vector<std::int32_t> sub_sums;
};

// Quantizes `x` (cols floats) with `block` elements per scale (32 or 256).
quant::ActRow quantize_activation(const float* x, std::int64_t cols, GgmlType type, ActBuffers& buf) {
  quant::ActRow row{};
  row.x = x;
  row.cols = cols;
  if (type == GgmlType::BF16) return row;
  const std::int64_t block = type == GgmlType::Q4_K ? 256 : 32, blocks = cols / block;
  buf.q.resize(static_cast<std::size_t>(cols));
  buf.d.resize(static_cast<std::size_t>(blocks));
  buf.dsum.resize(static_cast<std::size_t>(blocks));
  buf.sub_sums.resize(static_cast<std::size_t>(cols / 32));
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * block;
    float amax = 0.0f;
    for (std::int64_t i = 0; i < block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f, id = d == 0.0f ? 0.0f : 1.0f / d;
    std::int8_t* q = buf.q.data() + b * block;
    for (std::int64_t i = 0; i < block; ++i) {
      // Round to nearest even by adding and subtracting 1.5 * 2^23 (exact for |v| < 2^22; |x * id| <= 127
      // up to one rounding): inlined and vectorised, where std::nearbyint is a libm call on baseline x86-64.
      // The clamp keeps a rounding up from leaving int8's range.
      const float v = (xb[i] * id + 12582912.0f) - 12582912.0f;
      q[i] = static_cast<std::int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
    std::int32_t total = 0;
    for (std::int64_t s = 0; s < block / 32; ++s) {
      std::int32_t sum = 0;
      for (int i = 0; i < 32; ++i) sum += q[32 * s + i];
      buf.sub_sums[static_cast<std::size_t>(b * (block / 32) + s)] = sum;
      total += sum;
    }
    buf.d[static_cast<std::size_t>(b)] = d;
    buf.dsum[static_cast<std::size_t>(b)] = d * static_cast<float>(total);
  }
  if (type == GgmlType::Q8_0) {
    buf.q_biased.resize(static_cast<std::size_t>(cols));
    for (std::int64_t i = 0; i < cols; ++i) buf.q_biased[i] = static_cast<std::uint8_t>(buf.q[i] + 128);
  }
  if (type == GgmlType::Q4_0 || type == GgmlType::Q4_1) {
    buf.q_pair.resize(static_cast<std::size_t>(cols));
    const std::int64_t pairs = blocks / 2;
    for (std::int64_t p = 0; p < pairs; ++p) {
      const std::int8_t* a = buf.q.data() + 64 * p;
      const std::int8_t* b = a + 32;
      std::int8_t* o = buf.q_pair.data() + 64 * p;
      std::copy(a, a + 16, o);
      std::copy(b, b + 16, o + 16);
      std::copy(a + 16, a + 32, o + 32);
      std::copy(b + 16, b + 32, o + 48);
    }
  }
  row.q = buf.q.data();
  row.q_biased = buf.q_biased.data();
  row.q_pair = buf.q_pair.data();
  row.d = buf.d.data();
  row.dsum = buf.dsum.data();
  row.sub_sums = buf.sub_sums.data();
  return row;
}

std::string label(const std::string& name) { return name.empty() ? std::string("a quantized matrix") : "tensor '" + name + "'"; }

}  // namespace

bool has_quantized_kernel(GgmlType type) {
  return type == GgmlType::Q8_0 || type == GgmlType::Q4_0 || type == GgmlType::Q4_1 || type == GgmlType::Q4_K ||
         type == GgmlType::BF16;
}

QuantKernels detected_quant_kernels() { return quant_kernels_at(kernels::detected_cpu_isa()); }

const char* quant_kernels_name(QuantKernels kernels) {
  switch (kernels) {
    case QuantKernels::automatic: return quant_kernels_name(detected_quant_kernels());
    case QuantKernels::scalar: return "scalar";
    case QuantKernels::avx2: return "avx2";
    case QuantKernels::avx512: return "avx512-vnni";
  }
  return "?";
}

void set_quant_kernels(QuantKernels set) {
  // QuantKernels is ordered scalar < avx2 < avx512: a set above the detected one needs instructions this CPU lacks.
  if (set != QuantKernels::automatic && static_cast<int>(set) > static_cast<int>(detected_quant_kernels()))
    dew::fail("quantized kernels '", quant_kernels_name(set), "' need instructions this CPU lacks; it runs '",
              quant_kernels_name(detected_quant_kernels()), "' (or 'scalar')");
  switch (set) {
    case QuantKernels::automatic: return kernels::force_cpu_isa(std::nullopt);
    case QuantKernels::scalar: return kernels::force_cpu_isa(CpuIsa::baseline);
    case QuantKernels::avx2: return kernels::force_cpu_isa(CpuIsa::avx2);
    case QuantKernels::avx512: return kernels::force_cpu_isa(CpuIsa::avx512);
  }
}

QuantKernels active_quant_kernels() { return quant_kernels_at(kernels::cpu_isa()); }

std::int64_t matmul_dequantize_rows() { return dequantize_rows_threshold.load(); }
void set_matmul_dequantize_rows(std::int64_t rows) { dequantize_rows_threshold.store(rows > 0 ? rows : kDefaultDequantizeRows); }

QuantizedMatrix::QuantizedMatrix(GgmlType type, std::int64_t rows, std::int64_t cols, at::Tensor bytes, std::string name)
    : type_(type), rows_(rows), cols_(cols), bytes_(std::move(bytes)), name_(std::move(name)) {
  if (!has_quantized_kernel(type))
    dew::fail(label(name_), " is stored as ", formats::ggml_type_name(type),
              "; dew's quantized kernels take Q8_0, Q4_0, Q4_1, Q4_K and BF16 (load it as float32 instead: --dtype float32)");
  const std::int64_t block = formats::ggml_block_size(type);
  if (rows <= 0 || cols <= 0 || cols % block != 0)
    dew::fail(label(name_), " has shape [", rows, ", ", cols, "]; ", formats::ggml_type_name(type),
              " rows must be whole blocks of ", block, " elements");
  row_bytes_ = cols / block * formats::ggml_block_bytes(type);
  if (!bytes_.defined() || bytes_.scalar_type() != at::kByte || !bytes_.device().is_cpu() ||
      bytes_.numel() != rows * row_bytes_)
    dew::fail(label(name_), ": expected a CPU uint8 tensor of ", rows * row_bytes_, " bytes for [", rows, ", ", cols,
              "] of ", formats::ggml_type_name(type));
  bytes_ = bytes_.contiguous().view({rows, row_bytes_});
}

QuantizedMatrix QuantizedMatrix::from_float(const at::Tensor& weight, GgmlType type, std::string name) {
  if (weight.dim() != 2) dew::fail(label(name), ": a quantized matrix needs a 2-d weight, got ", weight.dim(), " dimensions");
  auto w = weight.detach().to(at::kCPU, at::kFloat).contiguous();
  const std::int64_t rows = w.size(0), cols = w.size(1), block = formats::ggml_block_size(type);
  if (cols % block != 0)
    dew::fail(label(name), " has ", cols, " columns; ", formats::ggml_type_name(type), " needs a multiple of ", block);
  const std::int64_t row_bytes = cols / block * formats::ggml_block_bytes(type);
  auto bytes = at::empty({rows, row_bytes}, at::kByte);
  const float* src = w.data_ptr<float>();
  std::uint8_t* dst = bytes.data_ptr<std::uint8_t>();
  at::parallel_for(0, rows, 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) formats::quantize_row(type, src + r * cols, cols, dst + r * row_bytes);
  });
  return QuantizedMatrix(type, rows, cols, bytes, std::move(name));
}

at::Tensor QuantizedMatrix::dequantize() const {
  auto out = at::empty({rows_, cols_}, at::kFloat);
  const std::uint8_t* src = bytes_.data_ptr<std::uint8_t>();
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, rows_, 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) formats::dequantize_row(type_, src + r * row_bytes_, cols_, dst + r * cols_);
  });
  return out;
}

at::Tensor QuantizedMatrix::embedding(const at::Tensor& ids) const {
  auto flat = ids.to(at::kCPU, at::kLong).contiguous().view(-1);
  const std::int64_t n = flat.numel();
  const std::int64_t* id = flat.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i)
    if (id[i] < 0 || id[i] >= rows_) dew::fail("token id ", id[i], " is outside the vocabulary of ", label(name_), " (", rows_, " rows)");
  auto out = at::empty({n, cols_}, at::kFloat);
  const std::uint8_t* src = bytes_.data_ptr<std::uint8_t>();
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, n, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) formats::dequantize_row(type_, src + id[i] * row_bytes_, cols_, dst + i * cols_);
  });
  auto sizes = ids.sizes().vec();
  sizes.push_back(cols_);
  return out.view(sizes);
}

QuantizedMatrix QuantizedMatrix::select_rows(const at::Tensor& index) const {
  return QuantizedMatrix(type_, index.numel(), cols_, bytes_.index_select(0, index.to(at::kLong).view(-1)).contiguous(), name_);
}

at::Tensor QuantizedMatrix::linear(const at::Tensor& x_in) const {
  if (x_in.dim() < 1 || x_in.size(-1) != cols_)
    dew::fail(label(name_), ": input has last dimension ", x_in.dim() ? x_in.size(-1) : 0, " but the matrix has ", cols_, " columns");
  if (!x_in.device().is_cpu())
    dew::fail(label(name_), ": quantized weights multiply on the CPU only; load the model as float32 (--dtype float32) for ", x_in.device().str());
  auto x = x_in.to(at::kFloat).contiguous();
  const std::int64_t n = x.numel() / cols_;
  auto out_sizes = x_in.sizes().vec();
  out_sizes.back() = rows_;
  auto out = at::empty({n, rows_}, at::kFloat);
  const std::uint8_t* w = bytes_.data_ptr<std::uint8_t>();
  const float* xs = x.data_ptr<float>();
  float* ys = out.data_ptr<float>();

  if (n >= matmul_dequantize_rows()) {
    // Prefill: float32 tiles of W through at::mm (one thread per tile inside the parallel region).
    auto x2 = x.view({n, cols_});
    const std::int64_t tile = std::max<std::int64_t>(16, std::min<std::int64_t>(256, (std::int64_t{1} << 18) / cols_));
    const std::int64_t tiles = (rows_ + tile - 1) / tile;
    at::parallel_for(0, tiles, 1, [&](std::int64_t begin, std::int64_t end) {
      auto wt = at::empty({tile, cols_}, at::kFloat);
      auto yt = at::empty({n, tile}, at::kFloat);
      for (std::int64_t t = begin; t < end; ++t) {
        const std::int64_t r0 = t * tile, nr = std::min(tile, rows_ - r0);
        float* wd = wt.data_ptr<float>();
        for (std::int64_t r = 0; r < nr; ++r) formats::dequantize_row(type_, w + (r0 + r) * row_bytes_, cols_, wd + r * cols_);
        auto y = yt.narrow(1, 0, nr);
        at::mm_out(y, x2, wt.narrow(0, 0, nr).t());
        out.narrow(1, r0, nr).copy_(y);
      }
    });
    return out.view(out_sizes);
  }

  const quant::DotRows dot = dot_for(kernel_table(), type_);
  thread_local std::vector<ActBuffers> buffers;
  if (buffers.size() < static_cast<std::size_t>(n)) buffers.resize(static_cast<std::size_t>(n));
  std::vector<quant::ActRow> acts(static_cast<std::size_t>(n));
  for (std::int64_t a = 0; a < n; ++a) acts[a] = quantize_activation(xs + a * cols_, cols_, type_, buffers[a]);
  // Output rows in tiles small enough that a tile's weights stay in cache across the activation rows,
  // which go through the kernels up to kMaxActRows at a time (sharing each weight block's unpacking).
  constexpr std::int64_t kTile = 16;
  const std::int64_t grain = std::max<std::int64_t>(kTile, (std::int64_t{1} << 16) / std::max<std::int64_t>(1, row_bytes_));
  at::parallel_for(0, rows_, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r0 = begin; r0 < end; r0 += kTile) {
      const std::int64_t nr = std::min(kTile, end - r0);
      for (std::int64_t a = 0; a < n; a += quant::kMaxActRows) {
        const int nx = static_cast<int>(std::min<std::int64_t>(quant::kMaxActRows, n - a));
        dot(w + r0 * row_bytes_, row_bytes_, nr, acts.data() + a, nx, ys + a * rows_ + r0, rows_);
      }
    }
  });
  return out.view(out_sizes);
}

}  // namespace dew::nn
