/**
 * @file limiting_resource_adaptor.hpp
 * @brief rmm::mr::limiting_resource_adaptor: caps the bytes allocated through it (in librmm).
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

namespace rmm::mr {

/**
 * @brief Fails allocations (rmm::out_of_memory) that would take the bytes allocated through it past a limit; sizes count rounded up to the alignment.
 *
 * A value type: copies share one librmm resource (== compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource passes its
 * librmm handle through.
 */
class limiting_resource_adaptor : public detail::resource_over_upstream {
 public:
  /**
   * @brief An adaptor over @p upstream_mr allowing @p allocation_limit bytes, counting sizes rounded up to @p alignment.
   * @throws rmm::logic_error when @p alignment is not a power of two
   */
  limiting_resource_adaptor(detail::upstream_holder upstream_mr, std::size_t allocation_limit, std::size_t alignment = CUDA_ALLOCATION_ALIGNMENT)
    : resource_over_upstream{std::move(upstream_mr),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return rmm_limiting_resource_adaptor_new(up, allocation_limit, alignment, out, err);
        },
        "limiting_resource_adaptor"}
  {
  }

  /** @brief The bytes allocated through the adaptor and not yet freed (rounded as counted). */
  [[nodiscard]] std::size_t get_allocated_bytes() const
  {
    return static_cast<std::size_t>(detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) { return rmm_limiting_resource_adaptor_get_allocated_bytes(handle(), out, err); },
      "limiting_resource_adaptor::get_allocated_bytes"));
  }

  /** @brief The limit in bytes. */
  [[nodiscard]] std::size_t get_allocation_limit() const
  {
    return static_cast<std::size_t>(detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) { return rmm_limiting_resource_adaptor_get_allocation_limit(handle(), out, err); },
      "limiting_resource_adaptor::get_allocation_limit"));
  }
};

static_assert(cuda::mr::resource_with<limiting_resource_adaptor, cuda::mr::device_accessible>);

}  // namespace rmm::mr
