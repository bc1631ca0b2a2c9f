#pragma once
// A weight matrix kept in a reduced-precision storage format for inference: ggml's blocks as a GGUF file
// stores them (Q8_0, Q4_0, Q4_1, Q4_K) or bf16, multiplied without first making a float32 copy.
//
// y = x @ W^T for x [..., cols] float32:
//   - up to matmul_dequantize_rows() rows (decode, batched decode, prefill chunks): each row of x is quantized to 8-bit blocks (32
//     elements for Q8_0/Q4_0/Q4_1, 256 for Q4_K; d = max|x| / 127, q = round(x / d)) and dotted with the
//     weight blocks in integers (nn/kernels/quant_dot.h), the output rows split over the intra-op threads
//     (at::parallel_for); up to 4 rows of x share each weight block's loads. bf16 rows are widened exactly
//     to float32 and multiplied with x as it is.
//   - more rows (very large batches): tiles of W are dequantized to float32 (formats::dequantize_row, the reference
//     dequantizer) and multiplied with at::mm.
// Kernels (nn/kernels/quant_dot.h): AVX-512 VNNI, AVX2, or portable scalar code, chosen at each call from
// nn/kernels' cpu_isa(); set_quant_kernels forces one (tests compare them).
//
// Error against float32 (the dequantized W times x, exactly): the activation's rounding moves each x_i by
// at most d_b / 2 = max_{block b}|x| / 254, so |y_j - y_j(exact)| <= sum_b (max_b|x| / 254) * sum_{i in b} |W_ji|,
// plus float32 summation error (see tests/nn_quantized_test.cpp). bf16 weights: float32 rounding only.
// Inference only: no autograd through it.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "dew/formats/gguf_file.h"

namespace dew::nn {

class QuantizedMatrix {
 public:
  QuantizedMatrix() = default;
  // `bytes`: a CPU uint8 tensor of rows * row_bytes bytes, each row cols / block_size blocks of `type`.
  // `name` is for messages ("blk.3.attn_q.weight"). Refuses types without kernels and column counts
  // that are not whole blocks, naming the tensor, the type and the size.
  QuantizedMatrix(formats::GgmlType type, std::int64_t rows, std::int64_t cols, at::Tensor bytes, std::string name = {});
  // A float matrix [rows, cols] stored as `type` (BF16, or Q8_0 through formats::quantize_row).
  static QuantizedMatrix from_float(const at::Tensor& weight, formats::GgmlType type, std::string name = {});

  formats::GgmlType type() const { return type_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t row_bytes() const { return row_bytes_; }
  std::int64_t storage_bytes() const { return rows_ * row_bytes_; }
  const at::Tensor& bytes() const { return bytes_; }
  const std::string& name() const { return name_; }

  // The whole matrix as float32 [rows, cols], as formats::dequantize_row gives it.
  at::Tensor dequantize() const;
  // Rows `ids` (int64, any shape, each in [0, rows)) as float32 [..., cols]: an embedding lookup.
  at::Tensor embedding(const at::Tensor& ids) const;
  // x @ W^T: x float32 [..., cols] -> float32 [..., rows].
  at::Tensor linear(const at::Tensor& x) const;
  // The same matrix with its rows reordered: row i of the result is row index[i] of this one.
  QuantizedMatrix select_rows(const at::Tensor& index) const;

 private:
  formats::GgmlType type_ = formats::GgmlType::F32;
  std::int64_t rows_ = 0, cols_ = 0, row_bytes_ = 0;
  at::Tensor bytes_;
  std::string name_;
};

// Whether QuantizedMatrix multiplies this type (Q8_0, Q4_0, Q4_1, Q4_K, BF16).
bool has_quantized_kernel(formats::GgmlType type);

enum class QuantKernels { automatic, scalar, avx2, avx512 };
// The kernels `automatic` resolves to on this CPU.
QuantKernels detected_quant_kernels();
const char* quant_kernels_name(QuantKernels kernels);  // "scalar", "avx2", "avx512-vnni"
// Forces a kernel set for every later multiplication (tests, benchmarks); `automatic` restores the
// detected one. Refuses a set this CPU cannot run. It forces the instruction set of every nn/kernels
// kernel (kernels::force_cpu_isa: scalar is the baseline), not only of these.
void set_quant_kernels(QuantKernels kernels);
QuantKernels active_quant_kernels();

// Rows of x from which linear() dequantizes tiles and uses at::mm instead of the integer kernels (default
// 256: on the AMD EPYC dev VM the integer kernels were faster up to 128 rows, the tiles at 512; see
// docs/benchmarks.md). Settable for benchmarks and tests; 0 restores the default.
std::int64_t matmul_dequantize_rows();
void set_matmul_dequantize_rows(std::int64_t rows);

}  // namespace dew::nn
