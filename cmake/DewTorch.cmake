# Finds LibTorch and defines the imported target dew::torch.
#
# Two ways, one switch (DEW_CUDA = AUTO | ON | OFF):
#  - CPU (OFF, or AUTO without a usable GPU): the CPU libraries (libtorch_cpu, libc10) that
#    scripts/setup.sh unpacks from the pinned PyPI wheel into DEW_LIBTORCH. Linking only these keeps the
#    binary free of the CUDA libraries that the wheel's GPU half would pull in.
#  - CUDA (ON, or AUTO where nvidia-smi sees a GPU and a CUDA LibTorch is at hand): cmake/DewTorchCuda.cmake,
#    which adds libtorch_cuda and c10_cuda from DEW_LIBTORCH_CUDA (scripts/setup_cuda.sh unpacks it from the
#    same wheel) or python3's torch, and the CUDA toolkit's headers. It needs no GPU: CI builds it
#    (scripts/cuda_build.sh) on machines without one.

set(DEW_TORCH_VERSION "2.11.0")
if(DEFINED ENV{DEW_CACHE})
  set(_dew_cache "$ENV{DEW_CACHE}")
else()
  set(_dew_cache "$ENV{HOME}/.cache/dew")
endif()
set(DEW_LIBTORCH "${_dew_cache}/libtorch-${DEW_TORCH_VERSION}" CACHE PATH "LibTorch unpacked by scripts/setup.sh")
set(DEW_LIBTORCH_CUDA "${_dew_cache}/libtorch-${DEW_TORCH_VERSION}-cuda" CACHE PATH
    "LibTorch with CUDA: unpacked by scripts/setup_cuda.sh, or a pip-installed torch/ directory")
set(DEW_CUDA "AUTO" CACHE STRING "Build with CUDA: AUTO, ON or OFF")
set_property(CACHE DEW_CUDA PROPERTY STRINGS AUTO ON OFF)
if(NOT DEW_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "DEW_CUDA must be AUTO, ON or OFF, got '${DEW_CUDA}'")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/DewTorchCuda.cmake)

set(_dew_use_cuda OFF)
if(DEW_CUDA STREQUAL "ON")
  set(_dew_use_cuda ON)
elseif(DEW_CUDA STREQUAL "AUTO")
  execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _smi_rc OUTPUT_QUIET ERROR_QUIET)
  if(_smi_rc EQUAL 0)
    dew_find_cuda_libtorch(_auto_root)
    if(_auto_root)
      set(_dew_use_cuda ON)
    endif()
  endif()
endif()

add_library(dew_torch INTERFACE)
if(_dew_use_cuda)
  dew_use_cuda_libtorch(dew_torch)  # sets DEW_TORCH_RPATH
else()
  if(NOT EXISTS "${DEW_LIBTORCH}/lib/libtorch_cpu.so")
    message(FATAL_ERROR "LibTorch not found in ${DEW_LIBTORCH} (DEW_LIBTORCH). Run scripts/setup.sh first, "
                        "or pass -DDEW_LIBTORCH=<dir with include/ and lib/libtorch_cpu.so>.")
  endif()
  set(_libdir "${DEW_LIBTORCH}/lib")
  target_include_directories(dew_torch SYSTEM INTERFACE "${DEW_LIBTORCH}/include"
                                                        "${DEW_LIBTORCH}/include/torch/csrc/api/include")
  # The CPU libraries, for every target but the CUDA variant's (cmake/DewCudaVariant.cmake), which links the
  # CUDA LibTorch instead: a target with the property DEW_LINKS_CUDA gets none of them.
  set(_cpu_only "$<NOT:$<BOOL:$<TARGET_PROPERTY:DEW_LINKS_CUDA>>>")
  target_link_libraries(dew_torch INTERFACE "$<${_cpu_only}:${_libdir}/libtorch_cpu.so>"
                                            "$<${_cpu_only}:${_libdir}/libc10.so>")
  # libtorch_cpu needs libcudart/libcupti at load time; setup.sh places them beside it.
  target_link_options(dew_torch INTERFACE "$<${_cpu_only}:-Wl,-rpath-link,${_libdir}>")
  target_compile_definitions(dew_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
  set(DEW_TORCH_RPATH "${_libdir}")
  message(STATUS "dew: LibTorch (CPU) from ${DEW_LIBTORCH}")
endif()
# OpenMP. at::parallel_for is a header template: its threaded body (ATen/ParallelOpenMP.h) exists only when the
# including file is compiled with -fopenmp, and without it every parallel_for in dew's own kernels (quantized
# matmuls, fused norms, activations, rotary) silently runs on one thread. LibTorch ships the OpenMP runtime it
# was built against (libgomp.so.1 beside libtorch_cpu): dew links that very file, so the process has one OpenMP
# runtime and one thread pool, the one at::set_num_threads sizes, never the compiler's libgomp beside it.
list(GET DEW_TORCH_RPATH 0 _torch_libdir)
if(NOT EXISTS "${_torch_libdir}/libgomp.so.1")
  message(FATAL_ERROR "LibTorch in ${_torch_libdir} has no libgomp.so.1 beside libtorch_cpu.so; dew's kernels need "
                      "the OpenMP runtime LibTorch uses. Re-run scripts/setup.sh to unpack the pinned wheel again.")
endif()
target_compile_options(dew_torch INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fopenmp>)
if(_dew_use_cuda)
  target_link_libraries(dew_torch INTERFACE "${_torch_libdir}/libgomp.so.1")
else()
  target_link_libraries(dew_torch INTERFACE "$<${_cpu_only}:${_torch_libdir}/libgomp.so.1>")
endif()
add_library(dew::torch ALIAS dew_torch)
set(CMAKE_BUILD_RPATH "${DEW_TORCH_RPATH}")
set(CMAKE_INSTALL_RPATH "${DEW_TORCH_RPATH}")
