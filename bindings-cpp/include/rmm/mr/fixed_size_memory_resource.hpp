/**
 * @file fixed_size_memory_resource.hpp
 * @brief rmm::mr::fixed_size_memory_resource: blocks of one size (in librmm).
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
 * @brief Serves allocations of at most block_size bytes from blocks of that size, taken from the upstream in chunks.
 *
 * A value type: copies share one librmm resource (== compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource passes its
 * librmm handle through.
 */
class fixed_size_memory_resource : public detail::resource_over_upstream {
 public:
  /** @brief RMM's default block size: 1 MiB. */
  static constexpr std::size_t default_block_size = std::size_t{1} << 20;
  /** @brief RMM's default number of blocks taken from the upstream at once. */
  static constexpr std::size_t default_blocks_to_preallocate = 128;

  /**
   * @brief A resource over @p upstream_mr of @p block_size-byte blocks, @p blocks_to_preallocate of them taken at once.
   * @throws rmm::out_of_memory when the upstream cannot provide the first chunk
   */
  explicit fixed_size_memory_resource(detail::upstream_holder upstream_mr, std::size_t block_size = default_block_size, std::size_t blocks_to_preallocate = default_blocks_to_preallocate)
    : resource_over_upstream{std::move(upstream_mr),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return rmm_fixed_size_memory_resource_new(up, block_size, blocks_to_preallocate, out, err);
        },
        "fixed_size_memory_resource"}
  {
  }

  /** @brief The block size in bytes. */
  [[nodiscard]] std::size_t get_block_size() const
  {
    return static_cast<std::size_t>(detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) { return rmm_fixed_size_memory_resource_get_block_size(handle(), out, err); },
      "fixed_size_memory_resource::get_block_size"));
  }
};

static_assert(cuda::mr::resource_with<fixed_size_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr
