/**
 * @file managed_memory_resource.hpp
 * @brief rmm::mr::managed_memory_resource (cuMemAllocManaged / cuMemFree, in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

namespace rmm::mr {

/**
 * @brief Unified (managed) memory from cuMemAllocManaged: accessible from the host and every device.
 *
 * A value type: copies share one librmm resource. Constructing one succeeds without a GPU (host
 * mode); allocating from it then throws rmm::cuda_error.
 */
class managed_memory_resource : public detail::c_resource {
 public:
  /** @brief A new managed_memory_resource (rmm_managed_memory_resource_new). */
  managed_memory_resource()
    : detail::c_resource{detail::make_handle(
        [](rmm_resource* out, rmm_error* err) { return rmm_managed_memory_resource_new(out, err); },
        "managed_memory_resource")}
  {
  }

  /** @brief Managed memory is host-accessible. */
  friend void get_property(managed_memory_resource const&, cuda::mr::host_accessible) noexcept {}
};

static_assert(cuda::mr::resource_with<managed_memory_resource, cuda::mr::device_accessible>);
static_assert(
  cuda::mr::resource_with<managed_memory_resource, cuda::mr::device_accessible, cuda::mr::host_accessible>);

}  // namespace rmm::mr
