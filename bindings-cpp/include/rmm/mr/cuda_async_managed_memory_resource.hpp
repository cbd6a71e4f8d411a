/**
 * @file cuda_async_managed_memory_resource.hpp
 * @brief rmm::mr::cuda_async_managed_memory_resource: stream-ordered managed memory from the
 * device's default managed memory pool (in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda_runtime_api.h>

namespace rmm::mr {

/**
 * @brief Managed (unified) memory from the current device's default managed memory pool,
 * allocated and freed in stream order; accessible from the host and the device.
 *
 * A value type: copies share one librmm resource (== compares identity).
 */
class cuda_async_managed_memory_resource : public detail::c_resource {
 public:
  /**
   * @brief A resource on the current device's managed memory pool.
   * @throws rmm::cuda_error without a GPU
   * @throws rmm::logic_error when the driver or device has no managed memory pools
   */
  cuda_async_managed_memory_resource()
    : detail::c_resource{detail::make_handle(
        [](rmm_resource* out, rmm_error* err) { return rmm_cuda_async_managed_memory_resource_new(out, err); },
        "cuda_async_managed_memory_resource")}
  {
  }

  /** @brief The pool this resource allocates from. */
  [[nodiscard]] cudaMemPool_t pool_handle() const
  {
    return static_cast<cudaMemPool_t>(detail::get_value<void*>(
      [&](void** out, rmm_error* err) {
        return rmm_cuda_async_managed_memory_resource_pool_handle(handle(), out, err);
      },
      "cuda_async_managed_memory_resource::pool_handle"));
  }

  /** @brief Managed memory is host-accessible. */
  friend void get_property(cuda_async_managed_memory_resource const&, cuda::mr::host_accessible) noexcept {}
};

static_assert(cuda::mr::resource_with<cuda_async_managed_memory_resource, cuda::mr::device_accessible>);
static_assert(cuda::mr::resource_with<cuda_async_managed_memory_resource,
                                      cuda::mr::device_accessible,
                                      cuda::mr::host_accessible>);

}  // namespace rmm::mr
