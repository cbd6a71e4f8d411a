/**
 * @file failure_callback_resource_adaptor.hpp
 * @brief rmm::mr::failure_callback_resource_adaptor: a callback decides whether to retry an
 * allocation the upstream could not serve (in librmm).
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
#include <functional>
#include <type_traits>
#include <utility>

namespace rmm::mr {

/**
 * @brief The callback of a failure_callback_resource_adaptor: gets the size of the failed request
 * and the adaptor's `callback_arg`; returns true to retry the request, false to give up.
 */
using failure_callback_t = std::function<bool(std::size_t, void*)>;

namespace detail {

/** @brief The context librmm holds for a C++ failure callback. */
struct failure_callback_box {
  failure_callback_t callback;
  void* arg;
};

/** @brief The C thunk: calls the std::function; an exception is caught here (it never reaches
 *  librmm) and counts as "give up". */
inline int failure_callback_thunk(std::size_t bytes, void* context) noexcept
{
  try {
    auto* box = static_cast<failure_callback_box*>(context);
    return box->callback(bytes, box->arg) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

/** @brief Frees the box when librmm drops the adaptor. */
inline void failure_callback_release(void* context) noexcept { delete static_cast<failure_callback_box*>(context); }

}  // namespace detail

/**
 * @brief Calls a callback when the upstream is out of memory (rmm::out_of_memory), and retries
 * the allocation while the callback returns true; when it returns false (or throws: the exception
 * is swallowed), rmm::out_of_memory is thrown. Other errors pass through at once.
 *
 * A value type: copies share one librmm resource and one callback (librmm keeps the callback until
 * its last reference is gone). The upstream may be any `any_resource<device_accessible>`, a user's
 * C++ resource included; an rmm resource passes its librmm handle through.
 *
 * @tparam ExceptionType the exception that triggers the callback: only rmm::out_of_memory (RMM's
 * default) is supported, since librmm retries on out-of-memory errors only.
 */
template <typename ExceptionType = rmm::out_of_memory>
class failure_callback_resource_adaptor : public detail::c_resource {
  static_assert(std::is_same_v<ExceptionType, rmm::out_of_memory>,
                "librmm's failure_callback_resource_adaptor retries on rmm::out_of_memory only");

 public:
  using exception_type = ExceptionType;  ///< The exception that triggers the callback.

  /**
   * @brief An adaptor over @p upstream calling @p callback with @p callback_arg.
   * @throws rmm::logic_error when @p callback is empty
   */
  failure_callback_resource_adaptor(device_any_resource const& upstream,
                                    failure_callback_t callback,
                                    void* callback_arg)
    : failure_callback_resource_adaptor{detail::upstream_holder{upstream}, std::move(callback), callback_arg}
  {
  }

  /** @brief As above, for an rmm resource as upstream (its handle is passed through). */
  failure_callback_resource_adaptor(detail::c_resource const& upstream,
                                    failure_callback_t callback,
                                    void* callback_arg)
    : failure_callback_resource_adaptor{detail::upstream_holder{upstream}, std::move(callback), callback_arg}
  {
  }

  /** @brief The upstream resource (a reference, valid while this resource or a copy lives). */
  [[nodiscard]] device_async_resource_ref get_upstream_resource() const noexcept { return upstream_.ref(); }

 private:
  failure_callback_resource_adaptor(detail::upstream_holder upstream, failure_callback_t callback, void* callback_arg)
    : detail::c_resource{make(upstream, std::move(callback), callback_arg)}, upstream_{std::move(upstream)}
  {
  }

  static rmm_resource make(detail::upstream_holder const& upstream, failure_callback_t callback, void* callback_arg)
  {
    if (!callback) { throw rmm::logic_error{"failure_callback_resource_adaptor: the callback is empty"}; }
    // librmm owns the box from here on, also when the call fails (it then releases it at once).
    auto* box = new detail::failure_callback_box{std::move(callback), callback_arg};
    return detail::make_handle(
      [&](rmm_resource* out, rmm_error* err) {
        return rmm_failure_callback_resource_adaptor_new(upstream.handle(), &detail::failure_callback_thunk, box,
                                                         &detail::failure_callback_release, out, err);
      },
      "failure_callback_resource_adaptor");
  }

  detail::upstream_holder upstream_;
};

static_assert(cuda::mr::resource_with<failure_callback_resource_adaptor<>, cuda::mr::device_accessible>);

}  // namespace rmm::mr
