/**
 * @file device_buffer.hpp
 * @brief rmm::device_buffer: untyped, uninitialized, stream-ordered device memory (RMM 26.x names),
 * an owner of librmm's rmm_device_buffer handle.
 *
 * The memory resource: every constructor takes `cuda::mr::any_resource<device_accessible>`, defaulting
 * to the current device's resource, as RMM. Any resource works, a user's own CCCL resource included:
 * an rmm resource passes its librmm handle through, any other goes behind the C vtable of
 * mr/detail/cpp_resource_box.hpp (mr::detail::to_c_resource), so librmm calls back into it. The buffer
 * shares ownership of its resource (also the default one: the registry's resource, not a reference
 * to it), so the resource lives as long as the memory.
 *
 * Host access: in host mode (no GPU) the buffer can only copy memory that its resource declares
 * host-accessible. A concrete resource type passed directly keeps its host_accessible property (the
 * template overloads); one that was first erased to `any_resource<device_accessible>` loses it.
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
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

namespace rmm {

namespace detail {

/**
 * @brief The resource of a container: the librmm handle the C buffer is given, and the resource as
 * the user passed it, so memory_resource() compares equal to a reference to that resource.
 */
class container_resource_holder {
 public:
  /** @brief The current device's resource (no user object). */
  explicit container_resource_holder(mr::detail::c_resource current) : handle_{std::move(current)} {}
  /** @brief @p original, passed to librmm as @p handle. */
  container_resource_holder(mr::device_any_resource original, mr::detail::upstream_holder handle)
    : handle_{std::move(handle)}, original_{std::move(original)}
  {
  }

  /** @brief The handle, BORROWED. */
  [[nodiscard]] rmm_resource handle() const noexcept { return handle_.handle(); }

  /** @brief A reference to the resource as the user passed it (or the registry's). */
  [[nodiscard]] device_async_resource_ref ref() const noexcept
  {
    if (original_.has_value()) { return device_async_resource_ref{*original_}; }
    return handle_.ref();
  }

 private:
  mr::detail::upstream_holder handle_;
  mutable std::optional<mr::device_any_resource> original_;
};

/** @brief Shared, so references from memory_resource() stay valid when the container is moved. */
using container_resource = std::shared_ptr<container_resource_holder>;

/** @brief The current device's resource, shared with the registry (RMM's default mr). */
inline container_resource current_container_resource()
{
  rmm_resource handle{nullptr, nullptr};
  rmm_error err{};
  rmm::detail::check(rmm_get_current_device_resource(&handle, &err), err, "get_current_device_resource_ref");
  return std::make_shared<container_resource_holder>(mr::detail::c_resource::adopt(handle));
}

/** @brief @p mr as a container resource (see the file comment). */
inline container_resource container_resource_of(mr::device_any_resource const& mr)
{
  return std::make_shared<container_resource_holder>(
    mr, mr::detail::upstream_holder{mr, mr::detail::upstream_holder::handle_only_t{}});
}

/** @brief A concrete resource as a container resource, keeping its host_accessible property. */
template <class R>
container_resource container_resource_of_concrete(R mr)
{
  mr::detail::upstream_holder handle{mr::detail::erase(mr), mr::detail::upstream_holder::handle_only_t{}};
  return std::make_shared<container_resource_holder>(mr::device_any_resource{std::move(mr)}, std::move(handle));
}

}  // namespace detail

/**
 * @brief Untyped, uninitialized device memory from a memory resource, freed on destruction on its
 * stream and on the device it was made on.
 *
 * Move-only. `resize` works in place while the new size fits the capacity and otherwise reallocates
 * and copies on the given stream; `shrink_to_fit` gives spare capacity back. Allocation, copies and
 * the final free are ordered on the buffer's stream; work on other streams must be synchronized by
 * the caller, as in RMM.
 */
class device_buffer {
 public:
  /**
   * @brief An empty buffer (no memory) over the current device's resource.
   * @throws rmm::logic_error / rmm::cuda_error when the current resource cannot be had
   */
  device_buffer() : mr_{detail::current_container_resource()} {}

  /**
   * @brief @p size uninitialized bytes allocated from @p mr on @p stream.
   * @throws rmm::out_of_memory / rmm::bad_alloc when the resource cannot provide them
   */
  device_buffer(std::size_t size, cuda_stream_view stream, mr::device_any_resource mr)
    : device_buffer{detail::container_resource_of(mr), size, CUDA_ALLOCATION_ALIGNMENT, nullptr, stream}
  {
  }
  /** @brief As above, from the current device's resource. */
  device_buffer(std::size_t size, cuda_stream_view stream)
    : device_buffer{detail::current_container_resource(), size, CUDA_ALLOCATION_ALIGNMENT, nullptr, stream}
  {
  }
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_buffer(std::size_t size, cuda_stream_view stream, R mr)
    : device_buffer{detail::container_resource_of_concrete(std::move(mr)), size, CUDA_ALLOCATION_ALIGNMENT, nullptr,
                    stream}
  {
  }

  /**
   * @brief @p size uninitialized bytes aligned to @p alignment (a power of two) from @p mr on @p stream.
   * @throws rmm::invalid_argument for an alignment that is not a power of two; rmm::bad_alloc for one
   * the resource cannot give (librmm's base resources: above CUDA_ALLOCATION_ALIGNMENT), as in RMM
   * @throws rmm::out_of_memory / rmm::bad_alloc when the resource cannot provide them
   */
  device_buffer(std::size_t size, std::size_t alignment, cuda_stream_view stream, mr::device_any_resource mr)
    : device_buffer{detail::container_resource_of(mr), size, alignment, nullptr, stream}
  {
  }
  /** @brief As above, from the current device's resource. */
  device_buffer(std::size_t size, std::size_t alignment, cuda_stream_view stream)
    : device_buffer{detail::current_container_resource(), size, alignment, nullptr, stream}
  {
  }
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_buffer(std::size_t size, std::size_t alignment, cuda_stream_view stream, R mr)
    : device_buffer{detail::container_resource_of_concrete(std::move(mr)), size, alignment, nullptr, stream}
  {
  }

  /**
   * @brief A copy of @p size bytes at @p source_data (host or device memory), copied asynchronously
   * on @p stream: the source must stay valid until then.
   * @throws rmm::logic_error for a null @p source_data with a non-zero size
   * @throws rmm::out_of_memory / rmm::bad_alloc / rmm::cuda_error
   */
  device_buffer(void const* source_data, std::size_t size, cuda_stream_view stream, mr::device_any_resource mr)
    : device_buffer{detail::container_resource_of(mr), size, CUDA_ALLOCATION_ALIGNMENT, copy_from(source_data), stream}
  {
  }
  /** @brief As above, from the current device's resource. */
  device_buffer(void const* source_data, std::size_t size, cuda_stream_view stream)
    : device_buffer{detail::current_container_resource(), size, CUDA_ALLOCATION_ALIGNMENT, copy_from(source_data),
                    stream}
  {
  }
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_buffer(void const* source_data, std::size_t size, cuda_stream_view stream, R mr)
    : device_buffer{detail::container_resource_of_concrete(std::move(mr)), size, CUDA_ALLOCATION_ALIGNMENT,
                    copy_from(source_data), stream}
  {
  }

  /** @brief A copy of @p size bytes at @p source_data with an explicit @p alignment (see above). */
  device_buffer(void const* source_data,
                std::size_t size,
                std::size_t alignment,
                cuda_stream_view stream,
                mr::device_any_resource mr)
    : device_buffer{detail::container_resource_of(mr), size, alignment, copy_from(source_data), stream}
  {
  }
  /** @brief As above, from the current device's resource. */
  device_buffer(void const* source_data, std::size_t size, std::size_t alignment, cuda_stream_view stream)
    : device_buffer{detail::current_container_resource(), size, alignment, copy_from(source_data), stream}
  {
  }
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_buffer(void const* source_data, std::size_t size, std::size_t alignment, cuda_stream_view stream, R mr)
    : device_buffer{detail::container_resource_of_concrete(std::move(mr)), size, alignment, copy_from(source_data),
                    stream}
  {
  }

  /**
   * @brief A deep copy of @p other's size() bytes (with its alignment; capacity = size) from @p mr,
   * copied asynchronously on @p stream. Work writing @p other on another stream must be synchronized
   * first.
   * @throws rmm::out_of_memory / rmm::bad_alloc / rmm::cuda_error
   */
  device_buffer(device_buffer const& other, cuda_stream_view stream, mr::device_any_resource mr)
    : device_buffer{other, stream, detail::container_resource_of(mr)}
  {
  }
  /** @brief As above, from the current device's resource. */
  device_buffer(device_buffer const& other, cuda_stream_view stream)
    : device_buffer{other, stream, detail::current_container_resource()}
  {
  }
  /** @brief As above, from a concrete resource type. */
  template <class R, class = mr::detail::enable_if_concrete_t<R>>
  device_buffer(device_buffer const& other, cuda_stream_view stream, R mr)
    : device_buffer{other, stream, detail::container_resource_of_concrete(std::move(mr))}
  {
  }

  device_buffer(device_buffer const&)            = delete;
  device_buffer& operator=(device_buffer const&) = delete;

  /**
   * @brief Takes over @p other's memory; @p other is left empty (size 0, default stream, same
   * resource, alignment 1 as in RMM).
   */
  device_buffer(device_buffer&& other) noexcept
    : buf_{std::exchange(other.buf_, nullptr)},
      empty_alignment_{std::exchange(other.empty_alignment_, moved_from_alignment)},
      mr_{other.mr_}
  {
  }

  /** @brief Frees this buffer's memory and takes over @p other's; @p other is left empty. */
  device_buffer& operator=(device_buffer&& other) noexcept
  {
    if (this != &other) {
      rmm_device_buffer_free(std::exchange(buf_, std::exchange(other.buf_, nullptr)));
      empty_alignment_ = std::exchange(other.empty_alignment_, moved_from_alignment);
      mr_              = other.mr_;
    }
    return *this;
  }

  /** @brief Frees the memory on the buffer's stream and device. */
  ~device_buffer() { rmm_device_buffer_free(buf_); }

  /**
   * @brief Grows the capacity to at least @p new_capacity bytes, keeping size and contents; makes
   * @p stream the buffer's stream first.
   * @throws rmm::out_of_memory / rmm::bad_alloc / rmm::cuda_error; the buffer is then unchanged
   */
  void reserve(std::size_t new_capacity, cuda_stream_view stream)
  {
    rmm_error err{};
    rmm::detail::check(rmm_device_buffer_reserve(ensure(), new_capacity, as_c(stream), &err), err,
                       "device_buffer::reserve");
  }

  /**
   * @brief Sets the size to @p new_size bytes: in place within the capacity, else reallocated to
   * exactly @p new_size bytes with the contents copied on @p stream (new bytes uninitialized); makes
   * @p stream the buffer's stream first.
   * @throws rmm::out_of_memory / rmm::bad_alloc / rmm::cuda_error; the buffer is then unchanged
   */
  void resize(std::size_t new_size, cuda_stream_view stream)
  {
    rmm_error err{};
    rmm::detail::check(rmm_device_buffer_resize(ensure(), new_size, as_c(stream), &err), err,
                       "device_buffer::resize");
  }

  /**
   * @brief Reallocates to exactly size() bytes when the capacity is larger, copying on @p stream;
   * makes @p stream the buffer's stream first.
   * @throws rmm::out_of_memory / rmm::bad_alloc / rmm::cuda_error
   */
  void shrink_to_fit(cuda_stream_view stream)
  {
    rmm_error err{};
    rmm::detail::check(rmm_device_buffer_shrink_to_fit(ensure(), as_c(stream), &err), err,
                       "device_buffer::shrink_to_fit");
  }

  /** @brief The memory (null when nothing is allocated). */
  [[nodiscard]] void const* data() const noexcept { return rmm_device_buffer_data(buf_); }
  /** @brief The memory (null when nothing is allocated). */
  void* data() noexcept { return rmm_device_buffer_data(buf_); }
  /** @brief The bytes in use. */
  [[nodiscard]] std::size_t size() const noexcept { return rmm_device_buffer_size(buf_); }
  /** @brief The bytes in use, signed. */
  [[nodiscard]] std::int64_t ssize() const noexcept { return static_cast<std::int64_t>(size()); }
  /** @brief Whether size() is 0. */
  [[nodiscard]] bool is_empty() const noexcept { return size() == 0; }
  /** @brief The bytes allocated (at least size()). */
  [[nodiscard]] std::size_t capacity() const noexcept { return rmm_device_buffer_capacity(buf_); }
  /** @brief The alignment of the memory. */
  [[nodiscard]] std::size_t alignment() const noexcept
  {
    return buf_ == nullptr ? empty_alignment_ : rmm_device_buffer_alignment(buf_);
  }
  /** @brief The stream the buffer's work and final free are ordered on. */
  [[nodiscard]] cuda_stream_view stream() const noexcept
  {
    return cuda_stream_view{static_cast<cudaStream_t>(rmm_device_buffer_stream(buf_))};
  }

  /**
   * @brief Orders future work and the final free on @p stream. The caller synchronizes @p stream
   * with the old one if work is still queued there.
   */
  void set_stream(cuda_stream_view stream) noexcept
  {
    rmm_error err{};
    int status = RMM_ERROR_INVALID_ARGUMENT;
    try {
      status = rmm_device_buffer_set_stream(ensure(), as_c(stream), &err);
    } catch (std::exception const& e) {
      std::fprintf(stderr, "rmm::device_buffer::set_stream failed: %s\n", e.what());
      return;
    }
    if (status != RMM_OK) {
      std::fprintf(stderr, "rmm::device_buffer::set_stream failed: %s: %s\n", rmm_error_kind_name(status),
                   err.message);
    }
  }

  /** @brief The resource the memory comes from; valid while this buffer (moved or not) lives. */
  [[nodiscard]] device_async_resource_ref memory_resource() const noexcept { return mr_->ref(); }

  /**
   * @brief Gives up librmm's handle (an rmm-rs extension, what <rmm/python.hpp> uses): the caller
   * owns the returned rmm_device_buffer* (never null; free it with rmm_device_buffer_free or move it
   * on with rmm_device_buffer_export), and this buffer is left empty, as if moved from.
   * @throws rmm::logic_error when an empty buffer's handle cannot be made
   */
  [[nodiscard]] rmm_device_buffer* release_c_handle()
  {
    rmm_device_buffer* handle = ensure();
    buf_ = nullptr;
    return handle;
  }

  /**
   * @brief A buffer that takes over the OWNING @p handle (for example from rmm_device_buffer_import);
   * its memory_resource() is the handle's resource. On an exception the caller still owns @p handle.
   * @throws rmm::logic_error for a null @p handle
   */
  static device_buffer adopt_c_handle(rmm_device_buffer* handle)
  {
    rmm_resource res{nullptr, nullptr};
    rmm_error err{};
    rmm::detail::check(rmm_device_buffer_memory_resource(handle, &res, &err), err, "device_buffer::adopt_c_handle");
    return device_buffer{
      std::make_shared<detail::container_resource_holder>(mr::detail::c_resource::adopt(res)), handle};
  }

 private:
  /** @brief A source pointer for the copying constructors (null: none). */
  struct copy_source {
    void const* ptr;
    bool copy;
  };
  static copy_source copy_from(void const* src) noexcept { return {src, true}; }

  static void* as_c(cuda_stream_view stream) noexcept { return static_cast<void*>(stream.value()); }

  device_buffer(detail::container_resource mr,
                std::size_t size,
                std::size_t alignment,
                copy_source src,
                cuda_stream_view stream)
    : mr_{std::move(mr)}
  {
    // RMM's check (RMM_EXPECTS ... rmm::invalid_argument), before anything is allocated.
    if (!rmm::is_supported_alignment(alignment)) {
      throw rmm::invalid_argument{"device_buffer: Requested alignment is not a power of 2"};
    }
    rmm_error err{};
    auto const status =
      src.copy ? rmm_device_buffer_new_copy(src.ptr, size, alignment, as_c(stream), mr_->handle(), &buf_, &err)
               : rmm_device_buffer_new(size, alignment, as_c(stream), mr_->handle(), &buf_, &err);
    mr::detail::check_allocation(status, err, size, alignment, "device_buffer");
  }
  device_buffer(detail::container_resource mr, std::size_t size, std::size_t alignment, std::nullptr_t,
                cuda_stream_view stream)
    : device_buffer{std::move(mr), size, alignment, copy_source{nullptr, false}, stream}
  {
  }

  device_buffer(device_buffer const& other, cuda_stream_view stream, detail::container_resource mr)
    : mr_{std::move(mr)}
  {
    rmm_error err{};
    auto const status =
      other.buf_ == nullptr
        ? rmm_device_buffer_new(0, other.empty_alignment_, as_c(stream), mr_->handle(), &buf_, &err)
        : rmm_device_buffer_copy(other.buf_, as_c(stream), mr_->handle(), &buf_, &err);
    mr::detail::check_allocation(status, err, other.size(), other.alignment(), "device_buffer (deep copy)");
  }

  /** @brief Owns @p adopted (see adopt_c_handle). */
  device_buffer(detail::container_resource res, rmm_device_buffer* adopted) : buf_{adopted}, mr_{std::move(res)} {}

  /** @brief The C buffer, made empty on first use for a default-constructed or moved-from buffer. */
  rmm_device_buffer* ensure()
  {
    if (buf_ == nullptr) {
      rmm_error err{};
      rmm::detail::check(
        rmm_device_buffer_new(0, empty_alignment_, nullptr, mr_->handle(), &buf_, &err), err,
        "device_buffer");
    }
    return buf_;
  }

  /** @brief A moved-from buffer's alignment (RMM's). */
  static constexpr std::size_t moved_from_alignment = 1;

  rmm_device_buffer* buf_{nullptr};
  /** @brief alignment() while there is no C buffer (default-constructed or moved-from). */
  std::size_t empty_alignment_{CUDA_ALLOCATION_ALIGNMENT};
  detail::container_resource mr_;
};

}  // namespace rmm
