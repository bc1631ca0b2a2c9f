// OMP_WAIT_POLICY=PASSIVE for dew's executables, unless the user set it.
//
// LibTorch's intra-op pool is GNU OpenMP, whose idle threads spin at a barrier before they sleep. On a
// machine whose cores are shared (the 2-core development and CI VMs), a spinning thread holds a core another
// process needs, and a thread descheduled mid-region stalls the others: the demo decoder's 2-thread step
// fell to 1,381-1,511 tok/s with one core busy elsewhere against 2,289-2,351 with PASSIVE (sleep at once),
// while on a quiet machine PASSIVE was level or slightly ahead (3,968-4,386 against 3,815-4,181 tok/s;
// docs/benchmarks.md, "Threads").
//
// libgomp reads the variable once, in its own initialiser, before main() runs; an executable's
// .preinit_array runs before any shared library's initialisers, so that is where it is set. This file is
// an object library linked into the executables only (a static archive would drop it: nothing references
// it).
#include <cstdlib>

namespace {

void default_omp_wait_policy(int, char**, char**) { setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0); }

}  // namespace

__attribute__((section(".preinit_array"), used)) static void (*const dew_default_omp_wait_policy)(int, char**, char**) =
    default_omp_wait_policy;
