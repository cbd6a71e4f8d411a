/**
 * @file device_scalar.hpp
 * @brief rmm::device_scalar<T>: one uninitialized element of a trivially copyable `T` in device
 * memory, over a device_uvector<T> of size 1 (RMM 26.x names).
 */
#pragma once

#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_uvector.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace rmm {

/**
 * @brief A single device value. Move-only, no default constructor. The memory resource is taken as
 * in device_buffer (any any_resource, defaulting to the current device's).
 */
template <typename T>
class device_scalar {
  static_assert(std::is_trivially_copyable<T>::value, "Scalar type must be trivially copyable");

 public:
  using value_type      = typename device_uvector<T>::value_type;       ///< T
  using size_type       = typename device_uvector<T>::size_type;        ///< The size type
  using reference       = typename device_uvector<T>::reference;        ///< T&
  using const_reference = typename device_uvector<T>::const_reference;  ///< T const&
  using pointer         = typename device_uvector<T>::pointer;          ///< The type of data()
  using const_pointer   = typename device_uvector<T>::const_pointer;    ///< The type of data() const

  device_scalar()                                = delete;
  device_scalar(device_scalar const&)            = delete;
  device_scalar& operator=(device_scalar const&) = delete;
  device_scalar(device_scalar&&) noexcept        = default;  ///< Takes over the value
  device_scalar& operator=(device_scalar&&) noexcept = default;  ///< Frees ours, takes over theirs
  ~device_scalar()                               = default;

  /** @brief An uninitialized value from @p mr, allocated on @p stream. */
  explicit device_scalar(cuda_stream_view stream, mr::device_any_resource mr) : storage_{1, stream, std::move(mr)} {}
  /** @brief As above, from the current device's resource. */
  explicit device_scalar(cuda_stream_view stream) : storage_{1, stream} {}
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_scalar(cuda_stream_view stream, R mr) : storage_{1, stream, std::move(mr)}
  {
  }

  /**
   * @brief A value from @p mr set to @p initial_value asynchronously on @p stream (@p initial_value
   * must stay alive until @p stream is synchronized, as in set_value_async).
   */
  explicit device_scalar(value_type const& initial_value, cuda_stream_view stream, mr::device_any_resource mr)
    : storage_{1, stream, std::move(mr)}
  {
    set_value_async(initial_value, stream);
  }
  /** @brief As above, from the current device's resource. */
  explicit device_scalar(value_type const& initial_value, cuda_stream_view stream) : storage_{1, stream}
  {
    set_value_async(initial_value, stream);
  }
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_scalar(value_type const& initial_value, cuda_stream_view stream, R mr) : storage_{1, stream, std::move(mr)}
  {
    set_value_async(initial_value, stream);
  }

  /** @brief A deep copy of @p other's value from @p mr, copied asynchronously on @p stream. */
  device_scalar(device_scalar const& other, cuda_stream_view stream, mr::device_any_resource mr)
    : storage_{other.storage_, stream, std::move(mr)}
  {
  }
  /** @brief As above, from the current device's resource. */
  device_scalar(device_scalar const& other, cuda_stream_view stream) : storage_{other.storage_, stream} {}
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_scalar(device_scalar const& other, cuda_stream_view stream, R mr)
    : storage_{other.storage_, stream, std::move(mr)}
  {
  }

  /** @brief The value, copied to the host on @p stream, which is synchronized. */
  [[nodiscard]] value_type value(cuda_stream_view stream) const { return storage_.front_element(stream); }

  /**
   * @brief Sets the value asynchronously on @p stream: @p value must stay alive and unchanged until
   * @p stream is synchronized (hence the deleted rvalue overload).
   */
  void set_value_async(value_type const& value, cuda_stream_view stream)
  {
    storage_.set_element_async(0, value, stream);
  }

  /** @brief Deleted: a temporary would be gone before the asynchronous copy reads it. */
  void set_value_async(value_type&&, cuda_stream_view) = delete;

  /** @brief Sets the value's bytes to zero asynchronously on @p stream. */
  void set_value_to_zero_async(cuda_stream_view stream) { storage_.set_element_to_zero_async(0, stream); }

  /** @brief The value's device address. */
  [[nodiscard]] pointer data() noexcept { return storage_.data(); }
  /** @brief The value's device address. */
  [[nodiscard]] const_pointer data() const noexcept { return storage_.data(); }

  /** @brief Always 1. */
  [[nodiscard]] static constexpr size_type size() noexcept { return 1; }

  /** @brief The stream the value's work and final free are ordered on. */
  [[nodiscard]] cuda_stream_view stream() const noexcept { return storage_.stream(); }
  /** @brief Orders future work and the final free on @p stream (the caller synchronizes the old one). */
  void set_stream(cuda_stream_view stream) noexcept { storage_.set_stream(stream); }

  /** @brief The resource the memory comes from. */
  [[nodiscard]] device_async_resource_ref memory_resource() const noexcept { return storage_.memory_resource(); }

 private:
  device_uvector<T> storage_;
};

}  // namespace rmm
