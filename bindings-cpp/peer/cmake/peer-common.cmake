# What bindings-cpp/peer (RMM's tests) and bindings-cpp/peer/bench (RMM's benchmarks) both make
# before including RMM's own CMakeLists.txt.

# The CUDA runtime: the toolkit's (REQUIRED when nvcc builds), else libcudart from RMM_PEER_CUDART
# (the nvidia-cuda-runtime wheel: no toolkit here) as CUDA::cudart, and CUDA::cudart_static (the
# wheel's static library beside it, or the shared one).
macro(rmm_peer_cuda_runtime cuda_required)
  if(${cuda_required})
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(NOT TARGET CUDA::cudart)
    if(RMM_PEER_CUDART STREQUAL "" OR NOT EXISTS "${RMM_PEER_CUDART}")
      message(FATAL_ERROR "No CUDA toolkit: pass -DRMM_PEER_CUDART=<libcudart.so.13> (scripts/peer/common.sh takes it from the nvidia-cuda-runtime wheel)")
    endif()
    add_library(CUDA::cudart SHARED IMPORTED)
    set_target_properties(CUDA::cudart PROPERTIES IMPORTED_LOCATION "${RMM_PEER_CUDART}")
    get_filename_component(_cudart_dir "${RMM_PEER_CUDART}" DIRECTORY)
    if(EXISTS "${_cudart_dir}/libcudart_static.a")
      add_library(CUDA::cudart_static STATIC IMPORTED)
      set_target_properties(CUDA::cudart_static PROPERTIES IMPORTED_LOCATION "${_cudart_dir}/libcudart_static.a"
                                                           INTERFACE_LINK_LIBRARIES "dl;rt;pthread")
    else()
      add_library(CUDA::cudart_static ALIAS CUDA::cudart)
    endif()
  endif()
endmacro()

# rapids_logger::rapids_logger from an unpacked rapids-logger wheel's rapids_logger/ (include/, lib64/),
# used as is since its CMake config wants CMake 4; else find_package(rapids_logger), if any.
macro(rmm_peer_rapids_logger root)
  if(NOT "${root}" STREQUAL "" AND EXISTS "${root}/include/rapids_logger/logger.hpp")
    add_library(rapids_logger::rapids_logger SHARED IMPORTED)
    set_target_properties(rapids_logger::rapids_logger PROPERTIES
      IMPORTED_LOCATION "${root}/lib64/librapids_logger.so"
      INTERFACE_INCLUDE_DIRECTORIES "${root}/include")
  else()
    find_package(rapids_logger QUIET)
  endif()
endmacro()

# RMM_SOURCE_DIR and RMM_BINARY_DIR as RMM's CMakeLists.txt use them: RMM_SOURCE_DIR is an include
# dir (sources include <benchmarks/utilities/...>), so it holds a link `benchmarks` to RMM's
# cpp/benchmarks (benchmarks_dir).
macro(rmm_peer_source_dir benchmarks_dir)
  set(RMM_SOURCE_DIR "${CMAKE_BINARY_DIR}/rmm-source")
  set(RMM_BINARY_DIR "${CMAKE_BINARY_DIR}")
  file(MAKE_DIRECTORY "${RMM_SOURCE_DIR}")
  file(CREATE_LINK "${benchmarks_dir}" "${RMM_SOURCE_DIR}/benchmarks" SYMBOLIC)
endmacro()
