#pragma once
// The loops of attention over short sequences (nn/short_attention.h runs them per batch and head): small
// products with the whole score matrix in cache, the softmax by query rows (causal) or down key-major
// columns, their backward, padded row copies and a transpose by 16 x 16 blocks in registers. Rows are
// padded to whole vectors of 16 floats (lanes.h).
#include <cstdint>

namespace dew::nn::kernels {

// The longest sequence: one head's score matrix, 256 x 256 floats, is 256 KiB.
constexpr std::int64_t kMaxTokens = 256;

// Which part of a product a causal mask leaves non-zero, for rows m..m+3 of C (row m of A is query m, or
// key m for the transposed products): all of it; the columns up to the row (scores; the rest is written 0);
// the depth up to the row (P V and dS K: P is 0 beyond); the depth from the row (P^T dO and dS^T Q).
enum class Band { kFull, kColumnsToRow, kDepthToRow, kDepthFromRow };

void small_gemm(std::int64_t M, std::int64_t n_all, std::int64_t K_all, const float* A, std::int64_t am, std::int64_t ak,
                const float* B, std::int64_t ldb, float* C, std::int64_t ldc, bool accumulate, Band band);
void copy_rows_padded(const float* from, std::int64_t stride, std::int64_t rows, std::int64_t hd, std::int64_t hdp, float factor,
                      float* to);
void copy_rows_unpadded(const float* from, std::int64_t rows, std::int64_t hd, std::int64_t hdp, float factor, float* to,
                        std::int64_t stride);
void softmax_rows(float* S, std::int64_t N, std::int64_t Np, float scale);
void softmax_backward_rows(const float* P, float* dP, std::int64_t N, std::int64_t Np, float scale);
void softmax_columns(float* S, std::int64_t N, std::int64_t Np, float scale);
void softmax_backward_columns(const float* P, float* dP, std::int64_t N, std::int64_t Np, float scale);
void gather_transposed(const float* from, std::int64_t stride, std::int64_t N, std::int64_t hd, std::int64_t Np, float* to);

}  // namespace dew::nn::kernels
