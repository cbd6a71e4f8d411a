/**
 * @file binning_memory_resource.hpp
 * @brief rmm::mr::binning_memory_resource: size-class bins over an upstream (in librmm).
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
 * @brief Sends each allocation to the smallest bin that fits it, and larger ones to the upstream.
 *
 * A value type: copies share one librmm resource (== compares identity) and its bins.
 *
 * Differs from RMM in one respect: add_bin() takes the bin resource as an owning
 * `any_resource` (librmm keeps it alive), where RMM takes a non-owning reference.
 */
class binning_memory_resource : public detail::resource_over_upstream {
 public:
  /** @brief A resource without bins over @p upstream_mr (add them with add_bin()). */
  explicit binning_memory_resource(detail::upstream_holder upstream_mr)
    : binning_memory_resource{std::move(upstream_mr), std::nullopt}
  {
  }

  /**
   * @brief A resource with fixed-size bins of 2^@p min_size_exponent ... 2^@p max_size_exponent bytes.
   * @throws rmm::logic_error when the exponents are negative or min > max
   */
  binning_memory_resource(detail::upstream_holder upstream_mr, int8_t min_size_exponent, int8_t max_size_exponent)
    : binning_memory_resource{std::move(upstream_mr), std::pair<int, int>{min_size_exponent, max_size_exponent}}
  {
  }

  /**
   * @brief Adds a bin for allocations up to @p allocation_size bytes: @p bin_resource (kept alive by
   * librmm), or a new fixed_size_memory_resource over the upstream when nullopt.
   */
  void add_bin(std::size_t allocation_size, std::optional<device_any_resource> bin_resource = std::nullopt)
  {
    detail::c_resource bin = detail::c_resource::adopt(rmm_resource{nullptr, nullptr});
    if (bin_resource.has_value()) { bin = detail::to_c_resource(*bin_resource); }
    rmm_error err{};
    rmm::detail::check(rmm_binning_memory_resource_add_bin(handle(), allocation_size, bin.handle(), &err), err,
                       "binning_memory_resource::add_bin");
  }

 private:
  binning_memory_resource(detail::upstream_holder upstream, std::optional<std::pair<int, int>> exponents)
    : resource_over_upstream{std::move(upstream),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return exponents.has_value()
                   ? rmm_binning_memory_resource_new_with_exponents(up, exponents->first, exponents->second, out, err)
                   : rmm_binning_memory_resource_new(up, out, err);
        },
        "binning_memory_resource"}
  {
  }
};

static_assert(cuda::mr::resource_with<binning_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr
