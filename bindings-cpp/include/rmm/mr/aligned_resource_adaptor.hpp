/**
 * @file aligned_resource_adaptor.hpp
 * @brief rmm::mr::aligned_resource_adaptor: aligns allocations to a larger alignment (in librmm).
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
 * @brief Aligns allocations of at least alignment_threshold bytes to alignment (at least 256) by over-allocating from its upstream.
 *
 * A value type: copies share one librmm resource (== compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource passes its
 * librmm handle through.
 */
class aligned_resource_adaptor : public detail::resource_over_upstream {
 public:
  /** @brief RMM's default threshold: 0, every allocation is aligned. */
  static constexpr std::size_t default_alignment_threshold = 0;

  /**
   * @brief An adaptor over @p upstream_mr aligning allocations of at least @p alignment_threshold bytes to @p alignment.
   * @throws rmm::logic_error when @p alignment is not a power of two
   */
  explicit aligned_resource_adaptor(detail::upstream_holder upstream_mr, std::size_t alignment = CUDA_ALLOCATION_ALIGNMENT, std::size_t alignment_threshold = default_alignment_threshold)
    : resource_over_upstream{std::move(upstream_mr),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return rmm_aligned_resource_adaptor_new(up, alignment, alignment_threshold, out, err);
        },
        "aligned_resource_adaptor"}
  {
  }
};

static_assert(cuda::mr::resource_with<aligned_resource_adaptor, cuda::mr::device_accessible>);

}  // namespace rmm::mr
