#include "dew/core/free_memory.h"

#include <dlfcn.h>
#include <malloc.h>

namespace dew {

void release_free_memory() {
  using Release = void (*)();
  static const auto tcmalloc_release = reinterpret_cast<Release>(::dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  if (tcmalloc_release) {
    tcmalloc_release();
  } else {
    ::malloc_trim(0);
  }
}

}  // namespace dew
