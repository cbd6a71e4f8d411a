/**
 * @file polymorphic_allocator.hpp
 * @brief rmm::mr::polymorphic_allocator (stream-ordered allocator over any device resource) and
 * rmm::mr::stream_allocator_adaptor (a standard Allocator bound to a stream), RMM 26.x names.
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <cstddef>
#include <memory>
#include <utility>

namespace rmm::mr {

/**
 * @brief A stream-ordered allocator of `T` over a type-erased device resource, in the manner of
 * `std::pmr::polymorphic_allocator`: containers of one allocator type can use different resources.
 *
 * allocate() and deallocate() take the stream to order on; stream_allocator_adaptor binds one to
 * make a standard Allocator. Every allocation is aligned to 256 bytes (CUDA_ALLOCATION_ALIGNMENT).
 *
 * The resource is held as an `any_resource`: an allocator made from a resource object owns a copy
 * of it (rmm's resources share their state between copies); the default one (and one made from a
 * resource_ref) refers to the resource without owning it, as in RMM. Copies and rebound copies
 * (the converting constructor) share the same resource.
 *
 * @tparam T the value type
 */
template <typename T>
class polymorphic_allocator {
 public:
  using value_type = T;  ///< The type of the objects allocated.

  /** @brief An allocator over get_current_device_resource_ref() (not owned). */
  polymorphic_allocator() = default;

  /** @brief An allocator over @p mr (implicit, so a resource or resource_ref converts). */
  polymorphic_allocator(device_any_resource mr) : mr_{std::move(mr)} {}

  /** @brief An allocator over the resource of @p other (shared with it). */
  template <typename U>
  polymorphic_allocator(polymorphic_allocator<U> const& other) : mr_{other.mr_}
  {
  }

  /**
   * @brief Storage for @p num objects, ordered on @p stream.
   * @throws rmm::out_of_memory, rmm::bad_alloc, rmm::cuda_error or rmm::logic_error from the resource
   */
  value_type* allocate(std::size_t num, cuda_stream_view stream)
  {
    return static_cast<value_type*>(mr_.allocate(stream, bytes(num), rmm::CUDA_ALLOCATION_ALIGNMENT));
  }

  /** @brief Gives back @p ptr (from allocate(num, ...) of an equal allocator), ordered on @p stream. */
  void deallocate(value_type* ptr, std::size_t num, cuda_stream_view stream) noexcept
  {
    mr_.deallocate(stream, ptr, num * sizeof(T), rmm::CUDA_ALLOCATION_ALIGNMENT);
  }

  /** @brief The resource (a reference, valid while this allocator or a copy lives). */
  [[nodiscard]] device_async_resource_ref get_upstream_resource() const noexcept
  {
    return device_async_resource_ref{mr_};
  }

 private:
  template <typename U>
  friend class polymorphic_allocator;

  /** @brief The size in bytes of @p num objects; a request too large to represent is rmm::bad_alloc. */
  static std::size_t bytes(std::size_t num)
  {
    if (num > static_cast<std::size_t>(-1) / sizeof(T)) {
      throw rmm::bad_alloc{"polymorphic_allocator: the requested number of objects overflows size_t"};
    }
    return num * sizeof(T);
  }

  // mutable: any_resource's allocate is not const, but allocating does not change the allocator.
  mutable device_any_resource mr_{get_current_device_resource_ref()};
};

/** @brief Allocators are equal when memory from one may be returned to the other. */
template <typename T, typename U>
bool operator==(polymorphic_allocator<T> const& lhs, polymorphic_allocator<U> const& rhs)
{
  return lhs.get_upstream_resource() == rhs.get_upstream_resource();
}

/** @brief The negation of ==. */
template <typename T, typename U>
bool operator!=(polymorphic_allocator<T> const& lhs, polymorphic_allocator<U> const& rhs)
{
  return not(lhs == rhs);
}

/**
 * @brief A standard C++ Allocator made of a stream-ordered allocator (allocate(n, stream),
 * deallocate(p, n, stream)) and a stream: allocate(n) and deallocate(p, n) use that stream.
 *
 * The stream must outlive the adaptor. Memory from it can be used by host code (std::vector, say)
 * only when the underlying resource is host-accessible.
 *
 * @tparam Allocator the stream-ordered allocator, e.g. polymorphic_allocator<T>
 */
template <typename Allocator>
class stream_allocator_adaptor {
 public:
  using value_type = typename std::allocator_traits<Allocator>::value_type;  ///< The value type.

  stream_allocator_adaptor() = delete;

  /** @brief Uses @p allocator on @p stream. */
  stream_allocator_adaptor(Allocator const& allocator, cuda_stream_view stream)
    : alloc_{allocator}, stream_{stream}
  {
  }

  /** @brief Uses (a rebound copy of) the allocator of @p other on its stream. */
  template <typename OtherAllocator>
  stream_allocator_adaptor(stream_allocator_adaptor<OtherAllocator> const& other)
    : stream_allocator_adaptor{Allocator{other.underlying_allocator()}, other.stream()}
  {
  }

  /** @brief The adaptor of the underlying allocator rebound to @p T. */
  template <typename T>
  struct rebind {
    /// The rebound adaptor type.
    using other = stream_allocator_adaptor<typename std::allocator_traits<Allocator>::template rebind_alloc<T>>;
  };

  /** @brief Storage for @p num objects, on stream(). @throws what the underlying allocator throws */
  value_type* allocate(std::size_t num) { return alloc_.allocate(num, stream()); }

  /** @brief Gives back @p ptr (from allocate(num) of an equal adaptor), on stream(). */
  void deallocate(value_type* ptr, std::size_t num) noexcept { alloc_.deallocate(ptr, num, stream()); }

  /** @brief The stream the underlying allocator is called with. */
  [[nodiscard]] cuda_stream_view stream() const noexcept { return stream_; }

  /** @brief The underlying allocator (a copy, sharing its resource). */
  [[nodiscard]] Allocator underlying_allocator() const noexcept { return alloc_; }

 private:
  Allocator alloc_;
  cuda_stream_view stream_;
};

/** @brief Adaptors are equal when their underlying allocators are. */
template <typename A, typename O>
bool operator==(stream_allocator_adaptor<A> const& lhs, stream_allocator_adaptor<O> const& rhs)
{
  return lhs.underlying_allocator() == rhs.underlying_allocator();
}

/** @brief The negation of ==. */
template <typename A, typename O>
bool operator!=(stream_allocator_adaptor<A> const& lhs, stream_allocator_adaptor<O> const& rhs)
{
  return not(lhs == rhs);
}

/** @brief A stream_allocator_adaptor of @p allocator on @p stream (the type is deduced). */
template <typename Allocator>
auto make_stream_allocator_adaptor(Allocator const& allocator, cuda_stream_view stream)
{
  return stream_allocator_adaptor<Allocator>{allocator, stream};
}

}  // namespace rmm::mr
