# The CUDA half of cmake/DewTorch.cmake: LibTorch with libtorch_cuda, linked by name, configured and built
# without a GPU.
#
# Why not LibTorch's own TorchConfig.cmake (find_package(Torch)): with CUDA it runs Caffe2's CUDA set-up,
# which exists to compile .cu files: enable_language(CUDA), a try_run of nvcc's output, the deprecated
# FindCUDA, a Python to hash NVRTC, and an "Auto" GPU-architecture detection whose try_run stops the
# configure on this toolchain ("requires the language dialect CUDA20 ... the current compiler NVIDIA does
# not support this": CMAKE_CUDA_STANDARD inherits dew's C++20, which CMake 3.25 cannot ask of nvcc); it
# configures only with TORCH_CUDA_ARCH_LIST and CMAKE_CUDA_STANDARD=17 set by hand. dew has no .cu files:
# it calls LibTorch's CUDA code, so it needs LibTorch's headers, four of its libraries and the CUDA
# runtime's headers and library, as the CPU path needs two libraries. Naming them keeps the configure free
# of GPU detection, CUDA language checks and Python.
#
# GPU architectures: every kernel dew runs is LibTorch's, compiled into libtorch_cuda for sm_75, 80, 86, 90
# (H100, H200), 100 and 120 (NVCC_FLAGS_EXTRA in ATen/cuda/CUDAConfig.h), so no architecture list and no
# CUDA standard apply to this build. When dew gets .cu files of its own: enable_language(CUDA) with
# CMAKE_CUDA_ARCHITECTURES "80;86;89;90" (A100, A10/RTX 30, L4/RTX 40, H100/H200) and CMAKE_CUDA_STANDARD 17
# (or 20 with a CMake that knows nvcc's flag for it).

# A LibTorch directory with lib/libtorch_cuda.so: DEW_LIBTORCH_CUDA, else python3's torch when it is a
# CUDA build (a GPU machine's own PyTorch; its nvidia-* wheels sit where libtorch_cuda's rpath looks).
# Empty when there is none.
function(dew_find_cuda_libtorch out)
  set(root "")
  if(EXISTS "${DEW_LIBTORCH_CUDA}/lib/libtorch_cuda.so")
    set(root "${DEW_LIBTORCH_CUDA}")
  else()
    execute_process(COMMAND python3 -c "import os, torch; assert torch.version.cuda; print(os.path.dirname(torch.__file__))"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE py_root OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rc EQUAL 0 AND EXISTS "${py_root}/lib/libtorch_cuda.so")
      set(root "${py_root}")
    endif()
  endif()
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

# Links `target` (an INTERFACE library) against LibTorch with CUDA; sets DEW_TORCH_RPATH in the caller.
function(dew_use_cuda_libtorch target)
  dew_require_cuda_libtorch(root)
  dew_cuda_compile_usage(${target} "${root}")
  dew_cuda_link_usage(${target} "${root}")
  set(DEW_TORCH_RPATH "${DEW_TORCH_RPATH}" PARENT_SCOPE)
endfunction()

# The CUDA LibTorch directory, or a configure error saying how to get one.
function(dew_require_cuda_libtorch out)
  dew_find_cuda_libtorch(root)
  if(NOT root)
    message(FATAL_ERROR "DEW_CUDA=ON: no LibTorch with CUDA: ${DEW_LIBTORCH_CUDA}/lib/libtorch_cuda.so does not "
                        "exist (DEW_LIBTORCH_CUDA) and python3 has no CUDA build of torch. Run scripts/setup_cuda.sh "
                        "(or scripts/cuda_build.sh, which runs it), or pass -DDEW_LIBTORCH_CUDA=<a torch/ directory "
                        "with include/ and lib/libtorch_cuda.so>, or build for the CPU with -DDEW_CUDA=OFF.")
  endif()
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

# What compiling against LibTorch with CUDA needs: its headers, the CUDA runtime's and NCCL's, and the switches
# that open the CUDA-only code (DEW_WITH_CUDA, dew's own; USE_C10D_NCCL, c10d's).
function(dew_cuda_compile_usage target root)
  dew_find_cuda_toolkit("${root}")
  # c10d's ProcessGroupNCCL.hpp includes nccl.h: the toolkit's include/ where NCCL was installed there, the
  # tree's include/ (setup_cuda.sh copies it from the NCCL wheel when the toolkit lacks it), or a pip
  # install's nvidia/nccl/include beside torch/.
  find_path(DEW_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} "${root}/include" "${root}/../nvidia/nccl/include")
  if(NOT DEW_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR "nccl.h not found (DEW_NCCL_INCLUDE_DIR): dew's NCCL backend needs NCCL's header; install "
                        "NCCL for CUDA ${CUDAToolkit_VERSION_MAJOR} into the toolkit, or pass -DDEW_NCCL_INCLUDE_DIR=<dir>.")
  endif()
  target_include_directories(${target} SYSTEM INTERFACE "${root}/include" "${root}/include/torch/csrc/api/include"
                                                         ${CUDAToolkit_INCLUDE_DIRS} "${DEW_NCCL_INCLUDE_DIR}")
  # USE_C10D_NCCL: what the wheel's own TorchConfig gives its users (libtorch_cuda is built with NCCL);
  # it opens ProcessGroupNCCL.hpp. DEW_WITH_CUDA: dew's own switch for its CUDA-only code.
  target_compile_definitions(${target} INTERFACE _GLIBCXX_USE_CXX11_ABI=1 DEW_WITH_CUDA=1 USE_C10D_NCCL)
  message(STATUS "dew: LibTorch with CUDA from ${root}; CUDA ${CUDAToolkit_VERSION} (nvcc in ${CUDAToolkit_BIN_DIR}); "
                 "nccl.h from ${DEW_NCCL_INCLUDE_DIR}")
endfunction()

# What linking against LibTorch with CUDA needs; sets DEW_TORCH_RPATH in the caller.
function(dew_cuda_link_usage target root)
  dew_find_cuda_toolkit("${root}")
  set(lib "${root}/lib")
  target_link_libraries(${target} INTERFACE "${lib}/libtorch_cpu.so" "${lib}/libc10.so" "${lib}/libtorch_cuda.so"
                                            "${lib}/libc10_cuda.so" CUDA::cudart)
  # --no-as-needed: keep libtorch_cuda although no dew symbol names it; loading it registers the CUDA backend.
  # -rpath-link: where the linker finds what libtorch_cuda needs (cuSPARSELt, NVSHMEM, cuFile beside it;
  # cuBLAS, cuDNN, NCCL in the toolkit).
  # --disable-new-dtags: the executables' rpath becomes DT_RPATH, which, unlike DT_RUNPATH, the loader also
  # uses for the libraries' own needs, so libtorch_cuda finds the toolkit's libraries on machines whose
  # ld.so.conf does not list the toolkit, with no LD_LIBRARY_PATH.
  target_link_options(${target} INTERFACE "-Wl,--no-as-needed" "-Wl,-rpath-link,${lib}"
                      "-Wl,-rpath-link,${CUDAToolkit_LIBRARY_DIR}" "-Wl,--disable-new-dtags")
  set(DEW_TORCH_RPATH "${lib};${CUDAToolkit_LIBRARY_DIR}" PARENT_SCOPE)
endfunction()

# The CUDA runtime's headers and libcudart (FindCUDAToolkit needs no GPU and enables no CUDA language), checked
# against the CUDA major version LibTorch in `root` was built for (its libc10_cuda names libcudart.so.N). A macro:
# CUDAToolkit_* and `want` land in the caller's scope.
macro(dew_find_cuda_toolkit root)
  file(STRINGS "${root}/lib/libc10_cuda.so" cudart_name REGEX "^libcudart\\.so\\.[0-9]+$" LIMIT_COUNT 1)
  string(REGEX REPLACE "^libcudart\\.so\\." "" want "${cudart_name}")
  find_package(CUDAToolkit)
  if(NOT CUDAToolkit_FOUND)
    message(FATAL_ERROR "DEW_CUDA=ON needs the CUDA ${want} toolkit (nvcc, its headers and libraries) and none was "
                        "found: install it, put its nvcc on PATH, or pass -DCUDAToolkit_ROOT=<toolkit dir>.")
  endif()
  if(want AND NOT "${want}" STREQUAL "${CUDAToolkit_VERSION_MAJOR}")
    message(FATAL_ERROR "LibTorch in ${root} was built for CUDA ${want} but the toolkit found is CUDA "
                        "${CUDAToolkit_VERSION} (${CUDAToolkit_BIN_DIR}); pass -DCUDAToolkit_ROOT=<a CUDA ${want} toolkit>.")
  endif()
endmacro()
