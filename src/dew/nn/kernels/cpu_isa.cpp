#include "dew/nn/kernels/cpu_isa.h"

#include <atomic>

#include "dew/core/error.h"

namespace dew::nn::kernels {

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const CpuIsa detected = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return CpuIsa::avx512;
    if (__builtin_cpu_supports("x86-64-v3")) return CpuIsa::avx2;
    return CpuIsa::baseline;
  }();
  return detected;
#else
  return CpuIsa::baseline;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const bool has = detected_cpu_isa() == CpuIsa::avx512 && __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

// Before this initialiser runs (a kernel called from another file's static initialiser) the level reads
// as zero, the baseline: slower, never wrong.
std::atomic<int> detail::active_isa{static_cast<int>(detected_cpu_isa())};

void force_cpu_isa(std::optional<CpuIsa> isa) {
  if (isa && static_cast<int>(*isa) > static_cast<int>(detected_cpu_isa()))
    dew::fail("the kernels cannot run '", cpu_isa_name(*isa), "': this CPU runs '", cpu_isa_name(detected_cpu_isa()),
              "' at most");
  detail::active_isa.store(static_cast<int>(isa ? *isa : detected_cpu_isa()));
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx2: return "avx2";
    default: return "baseline";
  }
}

}  // namespace dew::nn::kernels
