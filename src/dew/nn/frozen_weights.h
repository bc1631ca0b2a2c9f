#pragma once
// Frozen projection weights kept in the compute dtype.
//
// Under mixed precision (model.dtype bfloat16, parameters float32) every Linear casts its weight to the
// compute dtype at each call, and autograd keeps that copy until the backward: a LoRA step holds the float32
// base, plus a bfloat16 copy of it, for nothing, since a frozen weight never changes. Casting a frozen weight
// once, for good, gives the same bits at every call (the cast is deterministic) with a third of the memory and
// no per-call casts: the decoder's Linear inputs are always in the compute dtype (the blocks cast the normed
// stream to it), so the products are exactly the ones before. Embeddings and norms are left alone (the
// embedding feeds the float32 residual stream uncast, and norms run in float32).
//
// For training processes only: the weights are no longer the checkpoint's, so nothing may export or merge
// them. dew's LoRA runs reload their base from init.from for every export, evaluation and generation.
#include <cstdint>

#include "dew/nn/causal_transformer.h"

namespace dew::nn {

// Casts every Linear weight and bias that does not require grad, is not quantized, and is stored in a wider
// float type than model.dtype, to model.dtype. Returns the bytes freed (0 when nothing qualifies: float32
// compute, or every weight trains).
std::int64_t store_frozen_weights_in_compute_dtype(CausalTransformer& model);

}  // namespace dew::nn
