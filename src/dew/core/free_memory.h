#pragma once
// Giving freed heap memory back to the operating system.
//
// dew's executables use tcmalloc (cmake/DewMalloc.cmake), which keeps freed pages for reuse and returns them
// only slowly. After a one-off peak, such as loading float32 weights and then narrowing the frozen ones
// (nn/frozen_weights.h), those pages would count in the process's resident memory for the whole run. This
// asks the allocator that is in use to return them now: tcmalloc's MallocExtension_ReleaseFreeMemory when it
// is loaded (looked up at run time, so nothing here depends on which malloc was linked), else glibc's
// malloc_trim. Costs a few milliseconds; call it between phases, not in a step.
namespace dew {

void release_free_memory();

}  // namespace dew
