#include "dew/formats/fp8_blocks.h"

#include "dew/core/error.h"

namespace dew::formats {

at::Tensor dequantize_fp8_blocks(const at::Tensor& weight, const at::Tensor& scale_inv, std::int64_t block,
                                 const std::string& context) {
  if (block <= 0) dew::fail(context, ": the fp8 block size must be positive, got ", block);
  if (weight.dim() != 2) dew::fail(context, ": an fp8 block-scaled weight must be 2-D [out, in], got shape ", weight.sizes());
  const auto rows = weight.size(0), cols = weight.size(1);
  const std::int64_t want_rows = (rows + block - 1) / block, want_cols = (cols + block - 1) / block;
  if (scale_inv.dim() != 2 || scale_inv.size(0) != want_rows || scale_inv.size(1) != want_cols) {
    dew::fail(context, ": its block scales have shape ", scale_inv.sizes(), " but a [", rows, ", ", cols, "] weight in ", block, "x", block,
              " blocks needs [", want_rows, ", ", want_cols, "]; the checkpoint's weight_block_size and its scales disagree");
  }
  // Each scale repeated over its block, cut to the weight's size where the last block is partial.
  auto scales = scale_inv.to(at::kFloat)
                    .repeat_interleave(block, 0)
                    .repeat_interleave(block, 1)
                    .narrow(0, 0, rows)
                    .narrow(1, 0, cols);
  return weight.to(at::kFloat) * scales;
}

}  // namespace dew::formats
