/**
 * @file statistics_resource_adaptor.hpp
 * @brief rmm::mr::statistics_resource_adaptor: counts bytes and allocations (in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace rmm::mr {

/**
 * @brief Counts the bytes and allocations that pass through it to its upstream, in a stack of
 * frames (push_counters / pop_counters).
 *
 * A value type: copies share one adaptor and its counters.
 */
class statistics_resource_adaptor : public detail::resource_over_upstream {
 public:
  /** @brief A counter: the current value, the highest value reached and everything ever added. */
  struct counter {
    int64_t value{0};  ///< The current amount.
    int64_t peak{0};   ///< The highest value reached.
    int64_t total{0};  ///< Everything ever added.

    /** @brief Adds @p val (value and total), raising peak when reached. */
    counter& operator+=(int64_t val)
    {
      value += val;
      total += val;
      peak = std::max(value, peak);
      return *this;
    }

    /** @brief Subtracts @p val from value. */
    counter& operator-=(int64_t val)
    {
      value -= val;
      return *this;
    }

    /** @brief Folds a finished child frame @p val into this one (as pop_counters does). */
    void add_counters_from_tracked_sub_block(counter const& val)
    {
      peak = std::max(value + val.peak, peak);
      value += val.value;
      total += val.total;
    }

    /** @brief Field-wise equality. */
    friend bool operator==(counter const& a, counter const& b) noexcept
    {
      return a.value == b.value && a.peak == b.peak && a.total == b.total;
    }
    /** @brief Field-wise inequality. */
    friend bool operator!=(counter const& a, counter const& b) noexcept { return !(a == b); }
  };

  /** @brief An adaptor over @p upstream_mr (any device-accessible resource, a user's C++ one included). */
  explicit statistics_resource_adaptor(detail::upstream_holder upstream_mr)
    : resource_over_upstream{std::move(upstream_mr),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return rmm_statistics_resource_adaptor_new(up, out, err);
        },
        "statistics_resource_adaptor"}
  {
  }

  /** @brief The bytes counter of the current frame. */
  [[nodiscard]] counter get_bytes_counter() const
  {
    return convert(detail::get_value<rmm_counter>(
      [&](rmm_counter* out, rmm_error* err) {
        return rmm_statistics_resource_adaptor_get_bytes_counter(handle(), out, err);
      },
      "statistics_resource_adaptor::get_bytes_counter"));
  }

  /** @brief The allocations counter of the current frame. */
  [[nodiscard]] counter get_allocations_counter() const
  {
    return convert(detail::get_value<rmm_counter>(
      [&](rmm_counter* out, rmm_error* err) {
        return rmm_statistics_resource_adaptor_get_allocations_counter(handle(), out, err);
      },
      "statistics_resource_adaptor::get_allocations_counter"));
  }

  /** @brief Starts a new frame of zero counters. @return the (bytes, allocations) counters from before */
  std::pair<counter, counter> push_counters()
  {
    rmm_counter bytes{};
    rmm_counter allocations{};
    rmm_error err{};
    rmm::detail::check(rmm_statistics_resource_adaptor_push_counters(handle(), &bytes, &allocations, &err), err,
                       "statistics_resource_adaptor::push_counters");
    return {convert(bytes), convert(allocations)};
  }

  /**
   * @brief Ends the current frame, folding it into its parent.
   * @return the (bytes, allocations) counters of the frame that ended
   * @throws rmm::out_of_range when no frame was pushed (RMM throws std::out_of_range here; rmm::out_of_range
   * derives from it)
   */
  std::pair<counter, counter> pop_counters()
  {
    rmm_counter bytes{};
    rmm_counter allocations{};
    rmm_error err{};
    int status = rmm_statistics_resource_adaptor_pop_counters(handle(), &bytes, &allocations, &err);
    if (status == RMM_ERROR_INVALID_ARGUMENT) {
      // The handle is this type's own, so the only invalid argument is popping the last frame.
      throw rmm::out_of_range{std::string{"statistics_resource_adaptor::pop_counters: "} + err.message};
    }
    rmm::detail::check(status, err, "statistics_resource_adaptor::pop_counters");
    return {convert(bytes), convert(allocations)};
  }

 private:
  static counter convert(rmm_counter const& c) noexcept { return counter{c.value, c.peak, c.total}; }
};

static_assert(cuda::mr::resource_with<statistics_resource_adaptor, cuda::mr::device_accessible>);

}  // namespace rmm::mr
