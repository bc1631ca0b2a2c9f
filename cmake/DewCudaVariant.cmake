# The CUDA variant of a CPU tree: `dew` and the tensor test binary linked against LibTorch with CUDA from the
# objects this tree has already compiled, so that CI checks dew's GPU code without compiling dew twice
# (scripts/cuda_build.sh: -DDEW_CUDA_VARIANT=ON, then `ninja dew_cuda_cli dew_cuda_tests`; bin-cuda/dew and
# tests/dew_cuda_tests).
#
# Why the objects can be shared: the CPU LibTorch (scripts/setup.sh) and the CUDA one (scripts/setup_cuda.sh)
# are unpacked from the same wheel, so their headers are the same files (checked below), and only the files
# listed here hold code that differs with CUDA (#ifdef DEW_WITH_CUDA; checked below too). Those are compiled a
# second time with the CUDA switches and linked ahead of libdew.a: the linker then takes no member of the
# archive that defines the same symbols, and if it ever had to (a symbol only the CPU build of such a file
# defines), the link fails on the duplicate definitions, never silently.
#
# A tree configured with -DDEW_CUDA=ON (a GPU machine: scripts/gpu_check.sh) is CUDA throughout and needs no
# variant.

option(DEW_CUDA_VARIANT "Also link CUDA builds of dew and the tensor tests from this CPU tree (CI's CUDA check)" OFF)
if(NOT DEW_CUDA_VARIANT)
  return()
endif()
if(_dew_use_cuda)
  message(STATUS "dew: DEW_CUDA_VARIANT ignored: this tree is built with CUDA throughout")
  return()
endif()

# The files whose compiled code differs with CUDA, by layer: libdew's, then the command line's.
set(DEW_CUDA_LIB_SOURCES ${CMAKE_SOURCE_DIR}/src/dew/distributed/process_group.cpp)
set(DEW_CUDA_CLI_SOURCES ${DEW_CLI_CUDA_SOURCES})

# Any other file that tests CUDA's switches would be linked here in its CPU form: refuse to configure.
file(GLOB_RECURSE _dew_all_code ${CMAKE_SOURCE_DIR}/src/*.cpp ${CMAKE_SOURCE_DIR}/src/*.h
     ${CMAKE_SOURCE_DIR}/tests/*.cpp ${CMAKE_SOURCE_DIR}/tests/*.h ${CMAKE_SOURCE_DIR}/bench/*.cpp)
foreach(file ${_dew_all_code})
  file(STRINGS ${file} _cuda_switch REGEX "DEW_WITH_CUDA|USE_C10D_NCCL" LIMIT_COUNT 1)
  if(_cuda_switch AND NOT file IN_LIST DEW_CUDA_LIB_SOURCES AND NOT file IN_LIST DEW_CUDA_CLI_SOURCES)
    message(FATAL_ERROR "${file} tests DEW_WITH_CUDA or USE_C10D_NCCL but is not one of the files the CUDA variant "
                        "compiles twice: add it to DEW_CUDA_LIB_SOURCES in cmake/DewCudaVariant.cmake (a .cpp of "
                        "libdew) or keep CUDA switches out of headers.")
  endif()
endforeach()

dew_require_cuda_libtorch(_cuda_root)
# The same LibTorch: setup's markers name the wheel each tree came from; a pip-installed torch has none, so
# then its version header must match.
set(_cpu_marker "${DEW_LIBTORCH}/.complete")
set(_cuda_marker "${_cuda_root}/.complete")
if(EXISTS ${_cpu_marker} AND EXISTS ${_cuda_marker})
  file(READ ${_cpu_marker} _cpu_wheel)
  file(READ ${_cuda_marker} _cuda_wheel)
  string(REGEX MATCH "^[^ ]+ [^ \n]+" _cpu_wheel "${_cpu_wheel}")
  string(REGEX MATCH "^[^ ]+ [^ \n]+" _cuda_wheel "${_cuda_wheel}")
else()
  file(READ "${DEW_LIBTORCH}/include/torch/csrc/api/include/torch/version.h" _cpu_wheel)
  file(READ "${_cuda_root}/include/torch/csrc/api/include/torch/version.h" _cuda_wheel)
endif()
if(NOT _cpu_wheel STREQUAL _cuda_wheel)
  message(FATAL_ERROR "DEW_CUDA_VARIANT=ON links this tree's objects, compiled against ${DEW_LIBTORCH}, with the "
                      "LibTorch in ${_cuda_root}, which is another build ('${_cpu_wheel}' vs '${_cuda_wheel}'). "
                      "Unpack both from one wheel (scripts/setup.sh, scripts/setup_cuda.sh), or configure a tree of "
                      "its own with -DDEW_CUDA=ON.")
endif()

add_library(dew_torch_cuda_compile INTERFACE)
dew_cuda_compile_usage(dew_torch_cuda_compile "${_cuda_root}")
add_library(dew_torch_cuda_link INTERFACE)
dew_cuda_link_usage(dew_torch_cuda_link "${_cuda_root}")  # sets DEW_TORCH_RPATH here
target_link_libraries(dew_torch_cuda_link INTERFACE "${_cuda_root}/lib/libgomp.so.1")
set(_cuda_rpath ${DEW_TORCH_RPATH})

add_library(dew_cuda_lib_objects OBJECT EXCLUDE_FROM_ALL ${DEW_CUDA_LIB_SOURCES})
target_link_libraries(dew_cuda_lib_objects PRIVATE dew_torch_cuda_compile dew)

# DEW_LINKS_CUDA: dew::torch leaves out the CPU LibTorch for these two (cmake/DewTorch.cmake).
add_executable(dew_cuda_cli EXCLUDE_FROM_ALL ${DEW_CUDA_CLI_SOURCES} $<TARGET_OBJECTS:dew_cuda_lib_objects>)
target_link_libraries(dew_cuda_cli PRIVATE dew_torch_cuda_compile dew_malloc dew_cli_objects dew dew_torch_cuda_link)
set_target_properties(dew_cuda_cli PROPERTIES OUTPUT_NAME dew RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin-cuda
                                              DEW_LINKS_CUDA ON BUILD_RPATH "${_cuda_rpath}")

if(TARGET dew_test_objects)
  # Linking the object library brings its objects and its GoogleTest (found in tests/).
  add_executable(dew_cuda_tests EXCLUDE_FROM_ALL $<TARGET_OBJECTS:dew_cuda_lib_objects>)
  target_link_libraries(dew_cuda_tests PRIVATE dew_test_objects dew dew_torch_cuda_link)
  set_target_properties(dew_cuda_tests PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests
                                                  DEW_LINKS_CUDA ON BUILD_RPATH "${_cuda_rpath}")
  add_dependencies(dew_cuda_tests dew_cuda_cli)
endif()
message(STATUS "dew: CUDA variant (dew_cuda_cli, dew_cuda_tests) links this tree's objects with ${_cuda_root}")
