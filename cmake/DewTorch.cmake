# Finds LibTorch and defines the imported target dew::torch.
#
# Two ways, one switch (DEW_CUDA = AUTO | ON | OFF):
#  - CPU (OFF, or AUTO without a usable GPU): the CPU libraries (libtorch_cpu, libc10) that
#    scripts/setup.sh unpacks from the pinned PyPI wheel into DEW_LIBTORCH. Linking only these keeps the
#    binary free of the CUDA libraries that the wheel's GPU half would pull in.
#  - CUDA (ON, or AUTO where `python3 -c "import torch"` reports a CUDA build and nvidia-smi sees a GPU):
#    LibTorch's own TorchConfig.cmake from that Python installation (or DEW_LIBTORCH if it has one), which
#    brings libtorch_cuda, c10_cuda and the CUDA toolkit.

set(DEW_TORCH_VERSION "2.11.0")
if(DEFINED ENV{DEW_CACHE})
  set(_dew_cache "$ENV{DEW_CACHE}")
else()
  set(_dew_cache "$ENV{HOME}/.cache/dew")
endif()
set(DEW_LIBTORCH "${_dew_cache}/libtorch-${DEW_TORCH_VERSION}" CACHE PATH "LibTorch unpacked by scripts/setup.sh")
set(DEW_CUDA "AUTO" CACHE STRING "Build with CUDA: AUTO, ON or OFF")

set(_dew_use_cuda OFF)
if(DEW_CUDA STREQUAL "ON")
  set(_dew_use_cuda ON)
elseif(DEW_CUDA STREQUAL "AUTO")
  execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _smi_rc OUTPUT_QUIET ERROR_QUIET)
  if(_smi_rc EQUAL 0)
    execute_process(COMMAND python3 -c "import torch; assert torch.version.cuda; print(torch.utils.cmake_prefix_path)"
                    RESULT_VARIABLE _py_rc OUTPUT_VARIABLE _py_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_py_rc EQUAL 0)
      set(_dew_use_cuda ON)
    endif()
  endif()
endif()

if(_dew_use_cuda)
  if(NOT _py_prefix)
    execute_process(COMMAND python3 -c "import torch; print(torch.utils.cmake_prefix_path)"
                    OUTPUT_VARIABLE _py_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  list(APPEND CMAKE_PREFIX_PATH "${_py_prefix}")
  find_package(Torch REQUIRED CONFIG)
  add_library(dew_torch INTERFACE)
  target_link_libraries(dew_torch INTERFACE ${TORCH_LIBRARIES})
  target_compile_definitions(dew_torch INTERFACE DEW_WITH_CUDA=1)
  # Keep libtorch_cuda linked even though nothing names its symbols: it registers the CUDA backend.
  target_link_options(dew_torch INTERFACE "-Wl,--no-as-needed")
  list(GET TORCH_LIBRARIES 0 _first)
  get_filename_component(DEW_TORCH_LIBDIR "${TORCH_INSTALL_PREFIX}/lib" ABSOLUTE)
  message(STATUS "dew: LibTorch with CUDA from ${TORCH_INSTALL_PREFIX}")
else()
  if(NOT EXISTS "${DEW_LIBTORCH}/lib/libtorch_cpu.so")
    message(FATAL_ERROR "LibTorch not found in ${DEW_LIBTORCH} (DEW_LIBTORCH). Run scripts/setup.sh first, "
                        "or pass -DDEW_LIBTORCH=<dir with include/ and lib/libtorch_cpu.so>.")
  endif()
  set(DEW_TORCH_LIBDIR "${DEW_LIBTORCH}/lib")
  add_library(dew_torch INTERFACE)
  target_include_directories(dew_torch SYSTEM INTERFACE "${DEW_LIBTORCH}/include"
                                                        "${DEW_LIBTORCH}/include/torch/csrc/api/include")
  target_link_libraries(dew_torch INTERFACE "${DEW_TORCH_LIBDIR}/libtorch_cpu.so" "${DEW_TORCH_LIBDIR}/libc10.so")
  # libtorch_cpu needs libcudart/libcupti at load time; setup.sh places them beside it.
  target_link_options(dew_torch INTERFACE "-Wl,-rpath-link,${DEW_TORCH_LIBDIR}")
  target_compile_definitions(dew_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
  message(STATUS "dew: LibTorch (CPU) from ${DEW_LIBTORCH}")
endif()
add_library(dew::torch ALIAS dew_torch)
set(CMAKE_BUILD_RPATH "${DEW_TORCH_LIBDIR}")
set(CMAKE_INSTALL_RPATH "${DEW_TORCH_LIBDIR}")
