/**
 * @file cuda_async_memory_resource.hpp
 * @brief rmm::mr::cuda_async_memory_resource: stream-ordered memory from a CUDA memory pool it owns (in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace rmm::mr {

/**
 * @brief Device memory from a CUDA memory pool (cuMemPoolCreate) that the resource creates on the
 * current device and owns; allocation and deallocation are ordered on the given stream.
 *
 * A value type: copies share one pool (== compares identity); the last copy destroys the pool.
 */
class cuda_async_memory_resource : public detail::c_resource {
 public:
  /** @brief The kinds of shareable handle the pool's memory can be exported as (RMM's values). */
  enum class allocation_handle_type : std::int32_t {
    none                  = RMM_ALLOCATION_HANDLE_TYPE_NONE,
    posix_file_descriptor = RMM_ALLOCATION_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
    win32                 = RMM_ALLOCATION_HANDLE_TYPE_WIN32,
    win32_kmt             = RMM_ALLOCATION_HANDLE_TYPE_WIN32_KMT,
    fabric                = RMM_ALLOCATION_HANDLE_TYPE_FABRIC,
  };

  /**
   * @brief A resource with a new pool on the current device.
   * @param initial_pool_size bytes to prime the pool with (an allocation and free on stream 0)
   * @param release_threshold reserved bytes kept at synchronization points (default: all)
   * @param export_handle_type the handle type the pool's memory can be exported as
   * @throws rmm::cuda_error without a GPU or when the driver fails
   * @throws rmm::logic_error "Requested IPC memory handle type not supported"
   * @throws rmm::out_of_memory when priming fails
   */
  explicit cuda_async_memory_resource(std::optional<std::size_t> initial_pool_size             = {},
                                      std::optional<std::size_t> release_threshold             = {},
                                      std::optional<allocation_handle_type> export_handle_type = {})
    : detail::c_resource{detail::make_handle(
        [&](rmm_resource* out, rmm_error* err) {
          return rmm_cuda_async_memory_resource_new(
            detail::size_or_none(initial_pool_size), detail::size_or_none(release_threshold),
            static_cast<std::int32_t>(export_handle_type.value_or(allocation_handle_type::none)), out, err);
        },
        "cuda_async_memory_resource")}
  {
  }

  /** @brief The pool this resource allocates from; valid while this resource or a copy lives. */
  [[nodiscard]] cudaMemPool_t pool_handle() const
  {
    return static_cast<cudaMemPool_t>(detail::get_value<void*>(
      [&](void** out, rmm_error* err) { return rmm_cuda_async_memory_resource_pool_handle(handle(), out, err); },
      "cuda_async_memory_resource::pool_handle"));
  }
};

static_assert(cuda::mr::resource_with<cuda_async_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr
