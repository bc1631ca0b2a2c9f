#pragma once
// How every kernel in nn/kernels picks its instruction set: the one rule.
//
// A kernel's loop is written once, as a DEW_KERNEL_BODY function (always inlined), and exported through
// on_cpu_isa<body>: that compiles the body three times -- for x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA,
// F16C) and the x86-64 baseline -- and runs the copy cpu_isa() names at each call. Hand-written intrinsics
// (the quantized dot products) mark their functions DEW_TARGET_AVX512 / DEW_TARGET_AVX2 themselves and are
// chosen from the same cpu_isa(). So one binary runs at the widest vectors of the x86-64 it is on without
// a -march flag that would refuse older CPUs, and force_cpu_isa makes every kernel take a narrower path
// (tests compare them; benchmarks time them). What a body calls is built for the copy's ISA only if it
// is inlined: helpers are macros, always_inline or small inline functions.
//
// Float flags are the folder's, set in CMakeLists.txt (no trapping math, no errno: the clamps and the
// sqrt then vectorise); nothing here reads floating-point exception flags or errno.
// Elsewhere than x86-64 with GCC, the attributes are empty, cpu_isa() is baseline and each body compiles once.
#include <atomic>
#include <cstdint>
#include <optional>

namespace dew::nn::kernels {

enum class CpuIsa { baseline, avx2, avx512 };  // x86-64, x86-64-v3, x86-64-v4

// The widest level this CPU runs (read once).
CpuIsa detected_cpu_isa();
// Whether the CPU also has AVX-512 VNNI (the quantized AVX-512 dot products need it beyond x86-64-v4).
bool cpu_has_avx512_vnni();
// The level the kernels run now: detected_cpu_isa(), or what force_cpu_isa set. Inline, one relaxed load:
// some kernels are called once per row.
namespace detail {
extern std::atomic<int> active_isa;  // a CpuIsa; set when the program loads
}
inline CpuIsa cpu_isa() { return static_cast<CpuIsa>(detail::active_isa.load(std::memory_order_relaxed)); }
// Makes every later kernel call run at `isa` (nullopt: back to the detected level). Refuses a level this
// CPU lacks (dew::Error naming both).
void force_cpu_isa(std::optional<CpuIsa> isa);
const char* cpu_isa_name(CpuIsa isa);  // "baseline", "avx2", "avx512"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DEW_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#define DEW_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#define DEW_TARGET_AVX512_VNNI __attribute__((target("arch=x86-64-v4,avx512vnni")))
#else
#define DEW_TARGET_AVX2
#define DEW_TARGET_AVX512
#define DEW_TARGET_AVX512_VNNI
#endif
#define DEW_KERNEL_BODY __attribute__((always_inline)) inline

template <auto Body>
struct OnCpuIsa;
template <class R, class... A, R (*Body)(A...)>
struct OnCpuIsa<Body> {
  DEW_TARGET_AVX512 static R avx512(A... a) { return Body(a...); }
  DEW_TARGET_AVX2 static R avx2(A... a) { return Body(a...); }
  static R baseline(A... a) { return Body(a...); }
  static R run(A... a) {
    switch (cpu_isa()) {
      case CpuIsa::avx512: return avx512(a...);
      case CpuIsa::avx2: return avx2(a...);
      default: return baseline(a...);
    }
  }
};

// Calls Body (a DEW_KERNEL_BODY function) in its copy for cpu_isa(): on_cpu_isa<rows_loop>(x, y, n).
template <auto Body, class... A>
inline auto on_cpu_isa(A... a) {
  return OnCpuIsa<Body>::run(a...);
}

}  // namespace dew::nn::kernels
