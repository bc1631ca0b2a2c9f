#pragma once
// DEW_CPU_CLONES marks a hand-written CPU loop to be compiled three times -- for x86-64-v4 (AVX-512),
// x86-64-v3 (AVX2 and FMA) and the x86-64 baseline -- with the copy run chosen once, when the program loads
// (GCC's target_clones: an ifunc resolver reads the CPU's features). One binary thus runs its kernels at the
// widest vectors of whichever x86-64 it is on, without a -march flag that would refuse older CPUs. What such
// a function calls is built for the same ISA only if it is inlined (or a macro), so the kernels keep their
// inner helpers inline. Elsewhere than x86-64 the attribute is empty and the compiler's default applies.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DEW_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DEW_CPU_CLONES
#endif
