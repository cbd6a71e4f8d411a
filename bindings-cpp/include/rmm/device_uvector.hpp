/**
 * @file device_uvector.hpp
 * @brief rmm::device_uvector<T>: a typed, uninitialized, stream-ordered vector over a device_buffer
 * (RMM 26.x names).
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/detail/error.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/std/span>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace rmm {

/**
 * @brief A vector of uninitialized elements of a trivially copyable `T` in device memory.
 *
 * Unlike std::vector, elements are never constructed or destroyed, and the host cannot dereference
 * its iterators (they are raw device pointers): read and write single elements with element() and
 * set_element*(), or through device code. Move-only, no default constructor. Constructors take the
 * memory resource like device_buffer (any any_resource, defaulting to the current device's).
 * Storage is aligned to max(alignof(T), 256).
 */
template <typename T>
class device_uvector {
  static_assert(std::is_trivially_copyable<T>::value,
                "device_uvector only supports types that are trivially copyable.");

 public:
  using value_type             = T;                                     ///< T
  using size_type              = std::size_t;                           ///< The size type
  using reference              = value_type&;                           ///< value_type&
  using const_reference        = value_type const&;                     ///< value_type const&
  using pointer                = value_type*;                           ///< The type of data()
  using const_pointer          = value_type const*;                     ///< The type of data() const
  using iterator               = pointer;                               ///< A raw device pointer
  using const_iterator         = const_pointer;                         ///< A raw device pointer
  using reverse_iterator       = std::reverse_iterator<iterator>;       ///< Reverse iterator
  using const_reverse_iterator = std::reverse_iterator<const_iterator>; ///< Reverse const iterator

  device_uvector()                                 = delete;
  device_uvector(device_uvector const&)            = delete;
  device_uvector& operator=(device_uvector const&) = delete;
  device_uvector(device_uvector&&) noexcept        = default;  ///< Takes over the elements
  device_uvector& operator=(device_uvector&&) noexcept = default;  ///< Frees ours, takes over theirs
  ~device_uvector()                                = default;

  /** @brief An empty vector whose memory will come from @p mr. */
  explicit device_uvector(cuda_stream_view stream, mr::device_any_resource mr)
    : storage_{std::size_t{0}, element_alignment, stream, std::move(mr)}
  {
  }
  /** @brief As above, from the current device's resource. */
  explicit device_uvector(cuda_stream_view stream) : storage_{std::size_t{0}, element_alignment, stream} {}
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_uvector(cuda_stream_view stream, R mr) : storage_{std::size_t{0}, element_alignment, stream, std::move(mr)}
  {
  }

  /**
   * @brief @p size uninitialized elements from @p mr, allocated on @p stream.
   * @throws rmm::invalid_argument when size * sizeof(T) overflows (as RMM)
   * @throws rmm::out_of_memory when the resource has not the memory
   */
  explicit device_uvector(size_type size, cuda_stream_view stream, mr::device_any_resource mr)
    : storage_{elements_to_bytes(size), element_alignment, stream, std::move(mr)}
  {
  }
  /** @brief As above, from the current device's resource. */
  explicit device_uvector(size_type size, cuda_stream_view stream)
    : storage_{elements_to_bytes(size), element_alignment, stream}
  {
  }
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_uvector(size_type size, cuda_stream_view stream, R mr)
    : storage_{elements_to_bytes(size), element_alignment, stream, std::move(mr)}
  {
  }

  /** @brief A deep copy of @p other's elements from @p mr, copied asynchronously on @p stream. */
  explicit device_uvector(device_uvector const& other, cuda_stream_view stream, mr::device_any_resource mr)
    : storage_{other.storage_, stream, std::move(mr)}
  {
  }
  /** @brief As above, from the current device's resource. */
  explicit device_uvector(device_uvector const& other, cuda_stream_view stream) : storage_{other.storage_, stream} {}
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_uvector(device_uvector const& other, cuda_stream_view stream, R mr)
    : storage_{other.storage_, stream, std::move(mr)}
  {
  }

  /** @brief A pointer to element @p element_index (not checked beyond a debug assertion). */
  [[nodiscard]] pointer element_ptr(size_type element_index) noexcept
  {
    assert(element_index < size());
    return data() + element_index;
  }
  /** @brief A pointer to element @p element_index (not checked beyond a debug assertion). */
  [[nodiscard]] const_pointer element_ptr(size_type element_index) const noexcept
  {
    assert(element_index < size());
    return data() + element_index;
  }

  /**
   * @brief Writes @p value to element @p element_index, ordered on @p stream. @p value is read
   * asynchronously: it must stay alive and unchanged until @p stream is synchronized (hence the
   * deleted rvalue overload). Zero values of fundamental types are written with a memset.
   * @throws rmm::out_of_range for an index not below size()
   * @throws rmm::cuda_error when the copy fails
   */
  void set_element_async(size_type element_index, value_type const& value, cuda_stream_view stream)
  {
    check_index(element_index, "set_element_async");
    if constexpr (std::is_fundamental_v<value_type>) {
      // All bits zero, not `value == 0`: -0.0 compares equal to 0 but is not a memset of zeros.
      if (is_all_zero_bits(value)) {
        set_element_to_zero_async(element_index, stream);
        return;
      }
    }
    rmm_error err{};
    rmm::detail::check(rmm_memcpy_async(element_ptr(element_index), &value, sizeof(value_type),
                                        static_cast<void*>(stream.value()), &err),
                       err, "device_uvector::set_element_async");
  }

  /** @brief Deleted: a temporary would be gone before the asynchronous copy reads it. */
  void set_element_async(size_type, value_type const&&, cuda_stream_view) = delete;

  /**
   * @brief Sets the bytes of element @p element_index to zero, ordered on @p stream.
   * @throws rmm::out_of_range for an index not below size()
   */
  void set_element_to_zero_async(size_type element_index, cuda_stream_view stream)
  {
    check_index(element_index, "set_element_to_zero_async");
    rmm_error err{};
    rmm::detail::check(
      rmm_memset_async(element_ptr(element_index), 0, sizeof(value_type), static_cast<void*>(stream.value()), &err),
      err, "device_uvector::set_element_to_zero_async");
  }

  /**
   * @brief Writes @p value to element @p element_index and synchronizes @p stream.
   * @throws rmm::out_of_range for an index not below size()
   */
  void set_element(size_type element_index, value_type const& value, cuda_stream_view stream)
  {
    set_element_async(element_index, value, stream);
    stream.synchronize();
  }

  /**
   * @brief The value of element @p element_index, copied to the host on @p stream, which is synchronized.
   * @throws rmm::out_of_range for an index not below size()
   */
  [[nodiscard]] value_type element(size_type element_index, cuda_stream_view stream) const
  {
    check_index(element_index, "element");
    value_type value;
    rmm_error err{};
    rmm::detail::check(rmm_memcpy_async(&value, element_ptr(element_index), sizeof(value_type),
                                        static_cast<void*>(stream.value()), &err),
                       err, "device_uvector::element");
    stream.synchronize();
    return value;
  }

  /** @brief element(0). @throws rmm::out_of_range when empty */
  [[nodiscard]] value_type front_element(cuda_stream_view stream) const { return element(0, stream); }

  /** @brief element(size() - 1). @throws rmm::out_of_range when empty */
  [[nodiscard]] value_type back_element(cuda_stream_view stream) const { return element(size() - 1, stream); }

  /** @brief Grows the capacity to at least @p new_capacity elements, keeping size and contents. */
  void reserve(size_type new_capacity, cuda_stream_view stream)
  {
    storage_.reserve(elements_to_bytes(new_capacity), stream);
  }

  /** @brief Sets the size to @p new_size elements (new ones uninitialized), reallocating beyond the capacity. */
  void resize(size_type new_size, cuda_stream_view stream) { storage_.resize(elements_to_bytes(new_size), stream); }

  /** @brief Gives spare capacity back, copying on @p stream. */
  void shrink_to_fit(cuda_stream_view stream) { storage_.shrink_to_fit(stream); }

  /** @brief Hands over the storage; this vector is left empty. */
  device_buffer release() noexcept { return std::move(storage_); }

  /** @brief The elements the storage can hold without reallocating. */
  [[nodiscard]] size_type capacity() const noexcept { return bytes_to_elements(storage_.capacity()); }

  /** @brief The first element's device address (null when nothing is allocated). */
  [[nodiscard]] pointer data() noexcept { return static_cast<pointer>(storage_.data()); }
  /** @brief The first element's device address (null when nothing is allocated). */
  [[nodiscard]] const_pointer data() const noexcept { return static_cast<const_pointer>(storage_.data()); }

  [[nodiscard]] iterator begin() noexcept { return data(); }                    ///< data()
  [[nodiscard]] const_iterator begin() const noexcept { return data(); }        ///< data()
  [[nodiscard]] const_iterator cbegin() const noexcept { return data(); }       ///< data()
  [[nodiscard]] iterator end() noexcept { return data() + size(); }             ///< data() + size()
  [[nodiscard]] const_iterator end() const noexcept { return data() + size(); } ///< data() + size()
  [[nodiscard]] const_iterator cend() const noexcept { return end(); }          ///< data() + size()
  [[nodiscard]] reverse_iterator rbegin() noexcept { return reverse_iterator{end()}; }  ///< reverse end()
  [[nodiscard]] const_reverse_iterator rbegin() const noexcept { return crbegin(); }   ///< reverse end()
  [[nodiscard]] const_reverse_iterator crbegin() const noexcept { return const_reverse_iterator{cend()}; }
  [[nodiscard]] reverse_iterator rend() noexcept { return reverse_iterator{begin()}; }  ///< reverse begin()
  [[nodiscard]] const_reverse_iterator rend() const noexcept { return crend(); }       ///< reverse begin()
  [[nodiscard]] const_reverse_iterator crend() const noexcept { return const_reverse_iterator{cbegin()}; }

  /** @brief The number of elements. */
  [[nodiscard]] size_type size() const noexcept { return bytes_to_elements(storage_.size()); }
  /** @brief The number of elements, signed. */
  [[nodiscard]] std::int64_t ssize() const noexcept { return static_cast<std::int64_t>(size()); }
  /** @brief Whether there are no elements. */
  [[nodiscard]] bool is_empty() const noexcept { return size() == 0; }

  /** @brief A span of the elements (device memory). */
  operator cuda::std::span<T const>() const noexcept  // NOLINT(google-explicit-constructor)
  {
    return cuda::std::span<T const>{data(), size()};
  }
  /** @brief A span of the elements (device memory). */
  operator cuda::std::span<T>() noexcept  // NOLINT(google-explicit-constructor)
  {
    return cuda::std::span<T>{data(), size()};
  }

  /** @brief The resource the memory comes from. */
  [[nodiscard]] device_async_resource_ref memory_resource() const noexcept { return storage_.memory_resource(); }
  /** @brief The stream the vector's work and final free are ordered on. */
  [[nodiscard]] cuda_stream_view stream() const noexcept { return storage_.stream(); }
  /** @brief Orders future work and the final free on @p stream (the caller synchronizes the old one). */
  void set_stream(cuda_stream_view stream) noexcept { storage_.set_stream(stream); }

 private:
  static constexpr std::size_t element_alignment = std::max(alignof(T), CUDA_ALLOCATION_ALIGNMENT);

  void check_index(size_type element_index, const char* what) const
  {
    if (element_index >= size()) {
      throw rmm::out_of_range{std::string{"device_uvector::"} + what + ": Attempt to access out of bounds element."};
    }
  }

  static std::size_t elements_to_bytes(std::size_t num_elements)
  {
    if (num_elements > std::numeric_limits<std::size_t>::max() / sizeof(value_type)) {
      throw rmm::invalid_argument{"device_uvector: " + std::to_string(num_elements) + " elements of " +
                                  std::to_string(sizeof(value_type)) + " bytes overflow size_t"};
    }
    return num_elements * sizeof(value_type);
  }
  static bool is_all_zero_bits(value_type const& value) noexcept
  {
    unsigned char bytes[sizeof(value_type)];
    std::memcpy(bytes, &value, sizeof(value_type));
    return std::all_of(std::begin(bytes), std::end(bytes), [](unsigned char b) { return b == 0; });
  }
  static std::size_t bytes_to_elements(std::size_t num_bytes) noexcept { return num_bytes / sizeof(value_type); }

  device_buffer storage_;
};

}  // namespace rmm
