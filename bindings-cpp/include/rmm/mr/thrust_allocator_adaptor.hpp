/**
 * @file thrust_allocator_adaptor.hpp
 * @brief rmm::mr::thrust_allocator: a Thrust allocator over any device resource, ordered on a stream.
 *
 * Needs Thrust and the CUDA runtime (compile with nvcc); without them this header does not compile,
 * as RMM's does not.
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>

#include <cuda/memory_resource>
#include <cuda_runtime_api.h>
#include <thrust/device_malloc_allocator.h>
#include <thrust/device_ptr.h>
#include <thrust/memory.h>

#include <cstddef>
#include <string>
#include <utility>

namespace rmm::mr {

namespace detail {

/** @brief The calling thread's current CUDA device. @throws rmm::cuda_error when CUDA fails */
inline int thrust_allocator_current_device()
{
  int device          = 0;
  cudaError_t const s = cudaGetDevice(&device);
  if (s != cudaSuccess) {
    throw rmm::cuda_error{std::string{"thrust_allocator: cudaGetDevice failed: "} + cudaGetErrorString(s)};
  }
  return device;
}

/**
 * @brief Makes @p device current for its lifetime (and then the previous one again), so that an
 * allocator used on a thread with another current device still allocates on its own.
 */
class thrust_device_guard {
 public:
  explicit thrust_device_guard(int device) noexcept
  {
    if (cudaGetDevice(&old_) == cudaSuccess && old_ != device) { switched_ = cudaSetDevice(device) == cudaSuccess; }
  }
  ~thrust_device_guard()
  {
    if (switched_) { cudaSetDevice(old_); }
  }
  thrust_device_guard(thrust_device_guard const&)            = delete;
  thrust_device_guard& operator=(thrust_device_guard const&) = delete;

 private:
  int old_{0};
  bool switched_{false};
};

}  // namespace detail

/**
 * @brief An allocator for Thrust containers and algorithms (derived from
 * thrust::device_malloc_allocator<T>) that allocates from a device resource on a stream.
 *
 * It records the current CUDA device when constructed and allocates and frees on that device.
 * The resource is an `any_resource`: owned when made from a resource object, referred to (not
 * owned) when made from a resource_ref or by default (get_current_device_resource_ref()), as in
 * RMM. Copies and rebound copies share the resource, the stream and the device.
 *
 * @tparam T the value type
 */
template <typename T>
class thrust_allocator : public thrust::device_malloc_allocator<T> {
 public:
  using Base      = thrust::device_malloc_allocator<T>;  ///< The base allocator type.
  using pointer   = typename Base::pointer;              ///< thrust::device_ptr<T>.
  using size_type = typename Base::size_type;            ///< The size type.

  /** @brief The allocator of @p U with the same resource, stream and device. */
  template <typename U>
  struct rebind {
    using other = thrust_allocator<U>;  ///< The rebound type.
  };

  /** @brief Allocates from get_current_device_resource_ref() on the default stream. */
  thrust_allocator() = default;

  /** @brief Allocates from get_current_device_resource_ref() on @p stream. */
  explicit thrust_allocator(cuda_stream_view stream) : stream_{stream} {}

  /** @brief Allocates from @p mr on @p stream. */
  thrust_allocator(cuda_stream_view stream, device_any_resource mr) : stream_{stream}, mr_{std::move(mr)} {}

  /** @brief The allocator of @p other rebound to T (sharing its resource, stream and device). */
  template <typename U>
  thrust_allocator(thrust_allocator<U> const& other)
    : stream_{other.stream_}, mr_{other.mr_}, device_{other.device_}
  {
  }

  /**
   * @brief Storage for @p num objects of T, on stream() and the recorded device.
   * @throws rmm::out_of_memory, rmm::bad_alloc, rmm::cuda_error or rmm::logic_error from the resource
   */
  pointer allocate(size_type num)
  {
    if (num > static_cast<size_type>(-1) / sizeof(T)) {
      throw rmm::bad_alloc{"thrust_allocator: the requested number of objects overflows size_t"};
    }
    detail::thrust_device_guard const guard{device_};
    return thrust::device_pointer_cast(
      static_cast<T*>(mr_.allocate(stream_, num * sizeof(T), rmm::CUDA_ALLOCATION_ALIGNMENT)));
  }

  /** @brief Gives back @p ptr (from allocate(num)), on stream() and the recorded device. */
  void deallocate(pointer ptr, size_type num) noexcept
  {
    detail::thrust_device_guard const guard{device_};
    mr_.deallocate(stream_, thrust::raw_pointer_cast(ptr), num * sizeof(T), rmm::CUDA_ALLOCATION_ALIGNMENT);
  }

  /** @brief The resource (a reference, valid while this allocator or a copy lives). */
  [[nodiscard]] device_async_resource_ref get_upstream_resource() const noexcept
  {
    return device_async_resource_ref{mr_};
  }

  /** @brief The stream allocations are ordered on. */
  [[nodiscard]] cuda_stream_view stream() const noexcept { return stream_; }

  /** @brief Equal when memory from one may be returned to the other. */
  friend bool operator==(thrust_allocator const& lhs, thrust_allocator const& rhs)
  {
    return lhs.get_upstream_resource() == rhs.get_upstream_resource();
  }

  /** @brief The negation of ==. */
  friend bool operator!=(thrust_allocator const& lhs, thrust_allocator const& rhs) { return !(lhs == rhs); }

  /** @brief Its memory is device-accessible. */
  friend void get_property(thrust_allocator const&, cuda::mr::device_accessible) noexcept {}

 private:
  template <typename U>
  friend class thrust_allocator;

  cuda_stream_view stream_{};
  // mutable: any_resource's allocate is not const, but allocating does not change the allocator.
  mutable device_any_resource mr_{get_current_device_resource_ref()};
  int device_{detail::thrust_allocator_current_device()};
};

}  // namespace rmm::mr
