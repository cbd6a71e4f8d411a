/**
 * @file callback_memory_resource.hpp
 * @brief rmm::mr::callback_memory_resource: allocation and deallocation by user functions (in librmm).
 */
#pragma once

#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/guarded.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <utility>

namespace rmm::mr {

/**
 * @brief The allocate function of a callback_memory_resource: gets the size in bytes, the stream
 * and the resource's `alloc_arg`; returns memory of at least that size, aligned to 256 bytes.
 * Throwing (e.g. rmm::out_of_memory) fails the allocation with that kind of error.
 */
using allocate_callback_t = std::function<void*(std::size_t, cuda_stream_view, void*)>;

/**
 * @brief The deallocate function of a callback_memory_resource: gets a pointer from the allocate
 * function, its size, the stream and the resource's `dealloc_arg`.
 */
using deallocate_callback_t = std::function<void(void*, std::size_t, cuda_stream_view, void*)>;

namespace detail {

/** @brief The context librmm holds for the two C++ functions of a callback_memory_resource. */
struct callback_box {
  allocate_callback_t allocate;
  deallocate_callback_t deallocate;
  void* alloc_arg;
  void* dealloc_arg;
};

/** @brief The C thunk of the allocate function: exceptions become errors here (see
 *  detail::guarded), so none reaches librmm. */
inline int callback_allocate_thunk(
  std::size_t bytes, void* stream, void* context, void** out, rmm_error* err) noexcept
{
  if (out == nullptr) { return set_error(err, RMM_ERROR_INVALID_ARGUMENT, 0, "out is NULL"); }
  *out = nullptr;
  return guarded(err, bytes, [&] {
    auto* box = static_cast<callback_box*>(context);
    *out      = box->allocate(bytes, cuda_stream_view{static_cast<cudaStream_t>(stream)}, box->alloc_arg);
  });
}

/** @brief The C thunk of the deallocate function (exceptions become errors, as above). */
inline int callback_deallocate_thunk(
  void* ptr, std::size_t bytes, void* stream, void* context, rmm_error* err) noexcept
{
  return guarded(err, 0, [&] {
    auto* box = static_cast<callback_box*>(context);
    box->deallocate(ptr, bytes, cuda_stream_view{static_cast<cudaStream_t>(stream)}, box->dealloc_arg);
  });
}

/** @brief Frees the box when librmm drops the resource. */
inline void callback_release(void* context) noexcept { delete static_cast<callback_box*>(context); }

}  // namespace detail

/**
 * @brief A device memory resource whose allocations and frees are user functions (RMM's
 * callback_memory_resource).
 *
 * librmm calls the functions only for non-empty requests (0 bytes gives nullptr, freeing nullptr
 * does nothing), checks that returned pointers are 256-byte aligned (else rmm::logic_error; the
 * pointer is given back to the deallocate function) and turns nullptr into rmm::out_of_memory.
 * An exception thrown by a function is caught before it reaches librmm and rethrown from
 * allocate() as the matching rmm exception (std::bad_alloc: rmm::out_of_memory, rmm::cuda_error:
 * rmm::cuda_error, anything else: rmm::logic_error); deallocate() is noexcept and prints it.
 *
 * The functions may be called from several threads at once. A value type: copies share the
 * functions (== compares identity). Its memory is device-accessible only, as in RMM.
 */
class callback_memory_resource : public detail::c_resource {
 public:
  /**
   * @brief A resource calling @p allocate_callback with @p alloc_arg and @p deallocate_callback
   * with @p dealloc_arg.
   * @throws rmm::logic_error when a function is empty
   */
  callback_memory_resource(allocate_callback_t allocate_callback,
                           deallocate_callback_t deallocate_callback,
                           void* alloc_arg   = nullptr,
                           void* dealloc_arg = nullptr)
    : detail::c_resource{make(std::move(allocate_callback), std::move(deallocate_callback), alloc_arg, dealloc_arg)}
  {
  }

 private:
  static rmm_resource make(allocate_callback_t allocate_callback,
                           deallocate_callback_t deallocate_callback,
                           void* alloc_arg,
                           void* dealloc_arg)
  {
    if (!allocate_callback || !deallocate_callback) {
      throw rmm::logic_error{"callback_memory_resource: the allocate and deallocate callbacks must not be empty"};
    }
    // librmm owns the box from here on, also when the call fails (it then releases it at once).
    auto* box =
      new detail::callback_box{std::move(allocate_callback), std::move(deallocate_callback), alloc_arg, dealloc_arg};
    return detail::make_handle(
      [&](rmm_resource* out, rmm_error* err) {
        return rmm_callback_memory_resource_new(&detail::callback_allocate_thunk, &detail::callback_deallocate_thunk,
                                                box, &detail::callback_release, RMM_ACCESS_DEVICE, out, err);
      },
      "callback_memory_resource");
  }
};

static_assert(cuda::mr::resource_with<callback_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr
