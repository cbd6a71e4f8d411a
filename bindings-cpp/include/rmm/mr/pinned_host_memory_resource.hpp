/**
 * @file pinned_host_memory_resource.hpp
 * @brief rmm::mr::pinned_host_memory_resource (cuMemHostAlloc / cuMemFreeHost, in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

namespace rmm::mr {

/**
 * @brief Page-locked host memory from cuMemHostAlloc (portable, device-mapped): accessible from the host and every device.
 *
 * A value type: copies share one librmm resource. Constructing one succeeds without a GPU (host
 * mode); allocating from it then throws rmm::cuda_error.
 */
class pinned_host_memory_resource : public detail::c_resource {
 public:
  /** @brief A new pinned_host_memory_resource (rmm_pinned_host_memory_resource_new). */
  pinned_host_memory_resource()
    : detail::c_resource{detail::make_handle(
        [](rmm_resource* out, rmm_error* err) { return rmm_pinned_host_memory_resource_new(out, err); },
        "pinned_host_memory_resource")}
  {
  }

  /** @brief Pinned memory is host memory. */
  friend void get_property(pinned_host_memory_resource const&, cuda::mr::host_accessible) noexcept {}
};

static_assert(cuda::mr::resource_with<pinned_host_memory_resource, cuda::mr::device_accessible>);
static_assert(
  cuda::mr::resource_with<pinned_host_memory_resource, cuda::mr::device_accessible, cuda::mr::host_accessible>);

}  // namespace rmm::mr
