/**
 * @file sam_headroom_memory_resource.hpp
 * @brief rmm::mr::sam_headroom_memory_resource: system memory placed on the GPU up to a headroom (in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <cstddef>
#include <cstdint>

namespace rmm::mr {

/**
 * @brief System (malloc) memory, advised onto the current GPU while more than a headroom of its
 * memory stays free and onto the host past that (needs HMM or ATS).
 *
 * A value type: copies share one librmm resource.
 */
class sam_headroom_memory_resource : public detail::c_resource {
 public:
  /**
   * @brief A resource that keeps @p headroom bytes of the current device's memory free.
   * @throws rmm::cuda_error without a GPU
   * @throws rmm::logic_error when the device cannot access system memory
   */
  explicit sam_headroom_memory_resource(std::size_t headroom)
    : detail::c_resource{detail::make_handle(
        [&](rmm_resource* out, rmm_error* err) {
          return rmm_sam_headroom_memory_resource_new(static_cast<std::uint64_t>(headroom), out, err);
        },
        "sam_headroom_memory_resource")}
  {
  }

  /** @brief System memory is host-accessible. */
  friend void get_property(sam_headroom_memory_resource const&, cuda::mr::host_accessible) noexcept {}
};

static_assert(cuda::mr::resource_with<sam_headroom_memory_resource, cuda::mr::device_accessible>);
static_assert(cuda::mr::resource_with<sam_headroom_memory_resource, cuda::mr::device_accessible,
                                      cuda::mr::host_accessible>);

}  // namespace rmm::mr
