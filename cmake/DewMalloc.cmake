# Which malloc the dew executables use: DEW_MALLOC = tcmalloc (default) | system.
#
# Why not glibc's: LibTorch's CPU allocator takes every tensor from malloc, and a training step frees and
# re-allocates thousands of large blocks in a different order each step. glibc then keeps the holes
# (its mmap threshold rises to the largest freed block, so blocks up to 32 MiB come from the heap and
# fragment it): on SmolLM2-135M LoRA SFT (bench/post_training.sh) peak RSS was 6.6 GB against a live
# peak of about 4.4 GB. Forcing glibc to mmap big blocks removes the holes but page-faults every
# allocation (the step got 60% slower). tcmalloc_minimal (Debian libgoogle-perftools-dev) reuses freed
# spans without faults: 4.5 GB and a step slightly faster than glibc's. docs/benchmarks.md has the numbers.
#
# Linked with --no-as-needed ahead of libc, so its malloc/free interpose for LibTorch's shared libraries too.
set(DEW_MALLOC "tcmalloc" CACHE STRING "malloc for the dew executables: tcmalloc or system")
add_library(dew_malloc INTERFACE)
if(DEW_MALLOC STREQUAL "tcmalloc")
  find_library(DEW_TCMALLOC_LIBRARY NAMES tcmalloc_minimal)
  if(DEW_TCMALLOC_LIBRARY)
    target_link_libraries(dew_malloc INTERFACE "-Wl,--push-state,--no-as-needed" ${DEW_TCMALLOC_LIBRARY} "-Wl,--pop-state")
    message(STATUS "dew: malloc = tcmalloc_minimal (${DEW_TCMALLOC_LIBRARY})")
  else()
    message(WARNING "dew: libtcmalloc_minimal not found (apt-get install libgoogle-perftools-dev); using glibc malloc, "
                    "which costs post-training runs about 1.5x the peak memory. -DDEW_MALLOC=system silences this.")
  endif()
elseif(NOT DEW_MALLOC STREQUAL "system")
  message(FATAL_ERROR "DEW_MALLOC must be tcmalloc or system, got '${DEW_MALLOC}'")
endif()
