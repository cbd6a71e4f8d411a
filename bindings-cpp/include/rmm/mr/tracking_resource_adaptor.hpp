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

#if __has_include(<rapids_logger/logger.hpp>)
#include <rmm/logger.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace rmm::detail {

/** @brief A stack captured by a tracking_resource_adaptor for one allocation (RMM's name), as text. */
class stack_trace {
 public:
  /** @brief A stack with the text @p text. */
  explicit stack_trace(std::string text) : text_{std::move(text)} {}
  /** @brief The stack as text, one frame per line. */
  [[nodiscard]] std::string const& str() const noexcept { return text_; }
  /** @brief Writes the stack's text. */
  friend std::ostream& operator<<(std::ostream& os, stack_trace const& st) { return os << st.text_; }

 private:
  std::string text_;
};

}  // namespace rmm::detail

namespace rmm::mr {

/**
 * @brief Tracks the allocations outstanding through it (their bytes; with capture_stacks, where they were made).
 *
 * A value type: copies share one librmm resource (== compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource passes its
 * librmm handle through.
 */
class tracking_resource_adaptor : public detail::resource_over_upstream {
 public:
  /** @brief What is known of one outstanding allocation (RMM's tracking_resource_adaptor::allocation_info). */
  struct allocation_info {
    std::unique_ptr<rmm::detail::stack_trace> strace;  ///< its stack, or null when not captured
    std::size_t allocation_size;                       ///< its size in bytes

    allocation_info() = delete;
    /** @brief An allocation of @p size bytes with the stack @p stack (may be null). */
    allocation_info(std::size_t size, std::unique_ptr<rmm::detail::stack_trace> stack)
      : strace{std::move(stack)}, allocation_size{size}
    {
    }
  };

  /**
   * @brief An adaptor over @p upstream_mr; @p capture_stacks records a stack trace per allocation.
   * @throws nothing beyond librmm failures (rmm::logic_error)
   */
  explicit tracking_resource_adaptor(detail::upstream_holder upstream_mr, bool capture_stacks = false)
    : resource_over_upstream{std::move(upstream_mr),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return rmm_tracking_resource_adaptor_new(up, capture_stacks ? 1 : 0, out, err);
        },
        "tracking_resource_adaptor"}
  {
  }

  /** @brief The bytes outstanding through the adaptor. */
  [[nodiscard]] std::size_t get_allocated_bytes() const
  {
    return static_cast<std::size_t>(detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) { return rmm_tracking_resource_adaptor_get_allocated_bytes(handle(), out, err); },
      "tracking_resource_adaptor::get_allocated_bytes"));
  }

  /**
   * @brief The outstanding allocations, by pointer, with their sizes and (when stacks are captured)
   * stacks: a snapshot taken by this call.
   *
   * The map is this object's (each copy of the adaptor has its own) and stays valid until the
   * next call on this object. As in RMM, call it when no other thread calls it on the same object.
   * @throws rmm::logic_error when librmm fails (e.g. out of host memory)
   */
  [[nodiscard]] std::map<void*, allocation_info> const& get_outstanding_allocations() const
  {
    std::size_t count = 0;
    std::vector<rmm_allocation_record> records;
    do {  // allocations may come and go between the two calls: ask until the buffer was big enough
      records.resize(count);
      rmm_error err{};
      rmm::detail::check(rmm_tracking_resource_adaptor_get_outstanding_allocations(handle(), records.data(),
                                                                                   records.size(), &count, &err),
                         err, "tracking_resource_adaptor::get_outstanding_allocations");
    } while (count > records.size());
    records.resize(count);
    auto& snapshot = snapshot_.map;
    snapshot.clear();
    for (auto const& r : records) {
      std::unique_ptr<rmm::detail::stack_trace> stack;
      if (r.has_stack != 0) { stack = std::make_unique<rmm::detail::stack_trace>(allocation_stack(r.ptr)); }
      snapshot.emplace(r.ptr, allocation_info{r.bytes, std::move(stack)});
    }
    return snapshot;
  }

#if __has_include(<rapids_logger/logger.hpp>)
  /**
   * @brief Logs get_outstanding_allocations_str() at debug level to rmm::default_logger() (nothing
   * when RMM_LOG_ACTIVE_LEVEL is above debug, RMM's default). Needs rapids-logger (<rmm/logger.hpp>).
   */
  void log_outstanding_allocations() const
  {
#if RMM_LOG_ACTIVE_LEVEL <= RAPIDS_LOGGER_LOG_LEVEL_DEBUG
    RMM_LOG_DEBUG("Outstanding Allocations: %s", get_outstanding_allocations_str());
#endif
  }
#endif

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
  /** @brief The stack of the outstanding allocation at @p ptr, as text. */
  [[nodiscard]] std::string allocation_stack(void const* ptr) const
  {
    return detail::get_string(
      [&](char* buf, std::size_t capacity, std::size_t* length, rmm_error* err) {
        return rmm_tracking_resource_adaptor_get_allocation_stack(handle(), ptr, buf, capacity, length, err);
      },
      "tracking_resource_adaptor::get_outstanding_allocations");
  }

  /** @brief The map get_outstanding_allocations() returns: a copy of the adaptor starts empty. */
  struct snapshot_holder {
    snapshot_holder() = default;
    snapshot_holder(snapshot_holder const&) {}
    snapshot_holder(snapshot_holder&&) noexcept {}
    snapshot_holder& operator=(snapshot_holder const&) { return *this; }
    snapshot_holder& operator=(snapshot_holder&&) noexcept { return *this; }
    ~snapshot_holder() = default;
    std::map<void*, allocation_info> map;
  };

  mutable snapshot_holder snapshot_;
};

static_assert(cuda::mr::resource_with<tracking_resource_adaptor, cuda::mr::device_accessible>);

}  // namespace rmm::mr
