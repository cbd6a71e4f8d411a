/**
 * @file tracking_resource_adaptor.hpp
 * @brief rmm::mr::tracking_resource_adaptor: tracks outstanding allocations (in librmm).
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
#include <string>
#include <utility>

namespace rmm::mr {

/**
 * @brief Tracks the allocations outstanding through it (their bytes; with capture_stacks, where they were made).
 *
 * A value type: copies share one librmm resource (== compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource passes its
 * librmm handle through.
 */
class tracking_resource_adaptor : public detail::c_resource {
 public:
  /**
   * @brief An adaptor over @p upstream_mr; @p capture_stacks records a stack trace per allocation.
   * @throws nothing beyond librmm failures (rmm::logic_error)
   */
  explicit tracking_resource_adaptor(device_any_resource const& upstream_mr, bool capture_stacks = false)
    : tracking_resource_adaptor{detail::upstream_holder{upstream_mr}, capture_stacks}
  {
  }

  /** @brief As above, for an rmm resource as upstream (its handle is passed through). */
  explicit tracking_resource_adaptor(detail::c_resource const& upstream_mr, bool capture_stacks = false)
    : tracking_resource_adaptor{detail::upstream_holder{upstream_mr}, capture_stacks}
  {
  }

  /** @brief The upstream resource (a reference, valid while this resource or a copy lives). */
  [[nodiscard]] device_async_resource_ref get_upstream_resource() const noexcept { return upstream_.ref(); }

  /** @brief The bytes outstanding through the adaptor. */
  [[nodiscard]] std::size_t get_allocated_bytes() const
  {
    return static_cast<std::size_t>(detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) { return rmm_tracking_resource_adaptor_get_allocated_bytes(handle(), out, err); },
      "tracking_resource_adaptor::get_allocated_bytes"));
  }

  /**
   * @brief The outstanding allocations as text, one line each by address: `0x<address>: <bytes> B`,
   * followed by ` : callstack:` and the stack when stacks are captured.
   */
  [[nodiscard]] std::string get_outstanding_allocations_str() const
  {
    return detail::get_string(
      [&](char* buf, std::size_t capacity, std::size_t* length, rmm_error* err) {
        return rmm_tracking_resource_adaptor_get_outstanding_allocations_str(handle(), buf, capacity, length, err);
      },
      "tracking_resource_adaptor::get_outstanding_allocations_str");
  }

 private:
  tracking_resource_adaptor(detail::upstream_holder upstream, bool capture_stacks)
    : detail::c_resource{detail::make_handle(
        [&](rmm_resource* out, rmm_error* err) {
          return rmm_tracking_resource_adaptor_new(upstream.handle(), capture_stacks ? 1 : 0, out, err);
        },
        "tracking_resource_adaptor")},
      upstream_{std::move(upstream)}
  {
  }

  detail::upstream_holder upstream_;
};

static_assert(cuda::mr::resource_with<tracking_resource_adaptor, cuda::mr::device_accessible>);

}  // namespace rmm::mr
