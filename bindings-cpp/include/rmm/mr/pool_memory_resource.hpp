/**
 * @file pool_memory_resource.hpp
 * @brief rmm::mr::pool_memory_resource: a coalescing stream-ordered pool (in librmm, rmm-rs's pool).
 */
#pragma once

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
 * @brief A pool that grows from its upstream and coalesces freed blocks.
 *
 * A value type: copies share one pool (and == compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included: the pool's upstream calls then
 * land in it; an rmm resource passes its librmm handle through.
 */
class pool_memory_resource : public detail::resource_over_upstream {
 public:
  /**
   * @brief A pool over @p upstream_mr holding @p initial_pool_size bytes at first and at most
   * @p maximum_pool_size (unbounded when nullopt).
   * @throws rmm::logic_error when a size is not a multiple of 256
   * @throws rmm::out_of_memory when the upstream cannot provide the initial pool
   */
  pool_memory_resource(detail::upstream_holder upstream_mr,
                       std::size_t initial_pool_size,
                       std::optional<std::size_t> maximum_pool_size = std::nullopt)
    : resource_over_upstream{std::move(upstream_mr),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return rmm_pool_memory_resource_new(up, initial_pool_size, detail::size_or_none(maximum_pool_size), out, err);
        },
        "pool_memory_resource"}
  {
  }

  /** @brief The bytes the pool holds from its upstream. */
  [[nodiscard]] std::size_t pool_size() const
  {
    return static_cast<std::size_t>(detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) { return rmm_pool_memory_resource_pool_size(handle(), out, err); },
      "pool_memory_resource::pool_size"));
  }

  /** @brief The most bytes the pool may hold from its upstream; nullopt when unbounded. */
  [[nodiscard]] std::optional<std::size_t> maximum_pool_size() const
  {
    auto const maximum = detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) { return rmm_pool_memory_resource_maximum_pool_size(handle(), out, err); },
      "pool_memory_resource::maximum_pool_size");
    if (maximum == RMM_SIZE_NONE) { return std::nullopt; }
    return static_cast<std::size_t>(maximum);
  }
};

static_assert(cuda::mr::resource_with<pool_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr
