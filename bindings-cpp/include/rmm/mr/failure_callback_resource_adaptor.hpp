/**
 * @file failure_callback_resource_adaptor.hpp
 * @brief rmm::mr::failure_callback_resource_adaptor: a callback decides whether to retry an
 * allocation the upstream could not serve (header-only, as in RMM).
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/detail/error.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <cstddef>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace rmm::mr {

/**
 * @brief The callback of a failure_callback_resource_adaptor: gets the size of the failed request
 * and the adaptor's `callback_arg`; returns true to retry the request, false to give up.
 */
using failure_callback_t = std::function<bool(std::size_t, void*)>;

/**
 * @brief Calls a callback when the upstream throws `ExceptionType` (by default rmm::out_of_memory)
 * on an allocation, and retries the allocation while the callback returns true; when it returns
 * false the exception is rethrown. Other exceptions, and any exception the callback throws, reach
 * the caller unchanged. Deallocation forwards to the upstream.
 *
 * As RMM's, this adaptor is implemented in C++ (in this header, not in librmm): it must see the
 * upstream's own exception types, which a call through librmm's C ABI would reduce to error kinds
 * (a user resource's rmm::bad_alloc and rmm::out_of_memory alike become "out of memory" there). An
 * rmm resource as upstream throws the exceptions of <rmm/error.hpp> (out of memory:
 * rmm::out_of_memory). Set as a per-device resource it is held like any user C++ resource.
 *
 * A value type: copies share one upstream and one callback (== compares identity); the callback may
 * be called from several threads at once.
 *
 * @tparam ExceptionType the exception that triggers the callback
 */
template <typename ExceptionType = rmm::out_of_memory>
class failure_callback_resource_adaptor {
 public:
  using exception_type = ExceptionType;  ///< The exception that triggers the callback.

  /**
   * @brief An adaptor over @p upstream calling @p callback with @p callback_arg.
   * @throws rmm::logic_error when @p callback is empty
   */
  failure_callback_resource_adaptor(device_any_resource upstream, failure_callback_t callback, void* callback_arg)
    : state_{make_state(std::move(upstream), std::move(callback), callback_arg)}
  {
  }

  /** @brief As above, for an rmm resource as upstream (held as a copy of its own type). */
  template <class Upstream, detail::enable_if_rmm_upstream_t<Upstream> = 0>
  failure_callback_resource_adaptor(Upstream const& upstream, failure_callback_t callback, void* callback_arg)
    : failure_callback_resource_adaptor{device_any_resource{upstream}, std::move(callback), callback_arg}
  {
  }

  /** @brief The upstream resource (a reference, valid while this resource or a copy lives). */
  [[nodiscard]] device_async_resource_ref get_upstream_resource() const noexcept
  {
    // The object of the type the user passed (RMM's semantics: it compares equal to a reference to
    // that upstream).
    return device_async_resource_ref{state_->upstream};
  }

  /**
   * @brief Allocates from the upstream on @p stream, calling the callback and retrying while the
   * upstream throws ExceptionType and the callback returns true.
   * @throws ExceptionType when the callback returns false; whatever else the upstream or the
   * callback throws
   */
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment = rmm::CUDA_ALLOCATION_ALIGNMENT)
  {
    while (true) {
      try {
        return state_->upstream.allocate(stream, bytes, alignment);
      } catch (ExceptionType const&) {
        if (!state_->callback(bytes, state_->arg)) { throw; }
      }
    }
  }

  /** @brief Returns @p ptr to the upstream. */
  void deallocate(cuda::stream_ref stream, void* ptr, std::size_t bytes,
                  std::size_t alignment = rmm::CUDA_ALLOCATION_ALIGNMENT) noexcept
  {
    state_->upstream.deallocate(stream, ptr, bytes, alignment);
  }

  /** @brief allocate() on the default stream (as RMM's). */
  void* allocate_sync(std::size_t bytes, std::size_t alignment = rmm::CUDA_ALLOCATION_ALIGNMENT)
  {
    return allocate(cuda_stream_view{}, bytes, alignment);
  }

  /** @brief deallocate() on the default stream (as RMM's). */
  void deallocate_sync(void* ptr, std::size_t bytes, std::size_t alignment = rmm::CUDA_ALLOCATION_ALIGNMENT) noexcept
  {
    deallocate(cuda_stream_view{}, ptr, bytes, alignment);
  }

  /** @brief Copies compare equal; separately made adaptors do not. */
  bool operator==(failure_callback_resource_adaptor const& other) const noexcept { return state_ == other.state_; }
  /** @brief Negation of ==. */
  bool operator!=(failure_callback_resource_adaptor const& other) const noexcept { return !(*this == other); }

  /** @brief Device-accessible, as its upstream. */
  friend void get_property(failure_callback_resource_adaptor const&, cuda::mr::device_accessible) noexcept {}

 private:
  struct state {
    device_any_resource upstream;
    failure_callback_t callback;
    void* arg;
  };

  static std::shared_ptr<state> make_state(device_any_resource upstream, failure_callback_t callback, void* arg)
  {
    if (!callback) { throw rmm::logic_error{"failure_callback_resource_adaptor: the callback is empty"}; }
    return std::make_shared<state>(state{std::move(upstream), std::move(callback), arg});
  }

  std::shared_ptr<state> state_;
};

static_assert(cuda::mr::resource_with<failure_callback_resource_adaptor<>, cuda::mr::device_accessible>);

}  // namespace rmm::mr
