#pragma once
// Model FLOPs utilisation (MFU): the FLOPs a step must do by the model's arithmetic (the objective's count,
// e.g. nn/decoder_flops.h for decoders), divided by what the machine can do: a peak measured here with a
// short matmul.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>


namespace dew::training {

// Best-of-a-few square matmul throughput on `device` in `dtype` (FLOP/s), about 0.2-0.5 s of work. A
// practical ceiling for MFU: what this machine's BLAS reaches, not the data-sheet number. Its operands come
// from a generator of its own: the trainer measures after restoring a checkpoint's CPU generator state, and a
// draw from that generator here would shift every later draw (and the next checkpoint's rng_state) away from
// the uninterrupted run's.
double measure_peak_flops(c10::Device device, c10::ScalarType dtype);

}  // namespace dew::training
