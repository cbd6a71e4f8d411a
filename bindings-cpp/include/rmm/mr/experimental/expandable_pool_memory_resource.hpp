/**
 * @file expandable_pool_memory_resource.hpp
 * @brief rmm::mr::experimental::expandable_pool_memory_resource: a stream-ordered pool on one
 * reserved range of virtual addresses that grows in place and gives memory back granule by granule
 * (in librmm; experimental, not an RMM type).
 */
#pragma once

#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace rmm::mr::experimental {

/** @brief Counters of an expandable_pool_memory_resource, taken at one moment (see rmm_c.h). */
using expandable_pool_statistics = rmm_expandable_pool_statistics;

/**
 * @brief An allocation of another process's expandable pool, mapped into this one with no copy
 * (expandable_pool_memory_resource::export_allocation() in the other process). Move-only; the
 * destructor unmaps it.
 */
class imported_allocation {
 public:
  /**
   * @brief Receives an exported allocation from the connected Unix socket @p socket_fd (which stays
   * the caller's) and maps it.
   * @throws rmm::logic_error for a socket that carries no export; rmm::cuda_error when the driver
   * cannot map it
   */
  static imported_allocation receive(int socket_fd)
  {
    imported_allocation imported;
    rmm_error err{};
    rmm::detail::check(rmm_imported_span_receive(socket_fd, &imported.span_, &imported.data_, &imported.size_, &err),
                       err, "imported_allocation::receive");
    return imported;
  }

  imported_allocation(imported_allocation&& other) noexcept
    : span_{std::exchange(other.span_, nullptr)},
      data_{std::exchange(other.data_, nullptr)},
      size_{std::exchange(other.size_, 0)}
  {
  }
  imported_allocation& operator=(imported_allocation&& other) noexcept
  {
    if (this != &other) {
      rmm_imported_span_free(span_);
      span_ = std::exchange(other.span_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  imported_allocation(imported_allocation const&)            = delete;
  imported_allocation& operator=(imported_allocation const&) = delete;
  ~imported_allocation() { rmm_imported_span_free(span_); }

  /** @brief The first byte of the allocation, in this process's address space. */
  [[nodiscard]] void* data() const noexcept { return data_; }
  /** @brief The allocation's size in bytes. */
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  imported_allocation() = default;

  rmm_imported_span* span_{nullptr};
  void* data_{nullptr};
  std::size_t size_{0};
};

/**
 * @brief A stream-ordered pool on one reserved range of virtual addresses of the current device
 * (host memory in host mode): it grows in place by whole granules (cuMemCreate + cuMemMap +
 * cuMemSetAccess), so free space coalesces across growth steps; trim() gives back every granule
 * that lies wholly in free memory, between live blocks too; a live allocation can be exported to
 * another process (imported_allocation).
 *
 * Experimental: not an RMM type, and its API may change. A value type: copies share one pool
 * (== compares identity); the last copy unmaps everything.
 */
class expandable_pool_memory_resource : public rmm::mr::detail::c_resource {
 public:
  /**
   * @brief A pool on the current device.
   * @param initial_size bytes mapped at once (default: none)
   * @param maximum_size the most bytes the pool ever holds: its reservation, rounded up to the
   * granule (default: twice the device's memory)
   * @param release_threshold mapped bytes kept when frees give idle granules back (default: none;
   * everything stays mapped until trim())
   * @param peer_devices devices that get access to the pool's memory
   * @throws rmm::out_of_memory when the device cannot map @p initial_size
   * @throws rmm::logic_error for a peer that cannot access the device (and for any peer in host mode)
   * @throws rmm::cuda_error for a device without virtual memory management
   */
  explicit expandable_pool_memory_resource(std::optional<std::size_t> initial_size      = {},
                                           std::optional<std::size_t> maximum_size      = {},
                                           std::optional<std::size_t> release_threshold = {},
                                           std::vector<std::int32_t> const& peer_devices = {})
    : c_resource{rmm::mr::detail::make_handle(
        [&](rmm_resource* out, rmm_error* err) {
          return rmm_expandable_pool_memory_resource_new(
            rmm::mr::detail::size_or_none(initial_size), rmm::mr::detail::size_or_none(maximum_size),
            rmm::mr::detail::size_or_none(release_threshold), peer_devices.data(), peer_devices.size(), out, err);
        },
        "expandable_pool_memory_resource")}
  {
  }

  /** @brief The pool's counters (mapped, used, releasable bytes and more). */
  [[nodiscard]] expandable_pool_statistics statistics() const
  {
    return rmm::mr::detail::get_value<expandable_pool_statistics>(
      [&](expandable_pool_statistics* out, rmm_error* err) {
        return rmm_expandable_pool_memory_resource_statistics(handle(), out, err);
      },
      "expandable_pool_memory_resource::statistics");
  }

  /** @brief The bytes the pool has mapped now (device memory it holds). */
  [[nodiscard]] std::size_t mapped_bytes() const
  {
    return static_cast<std::size_t>(rmm::mr::detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) {
        return rmm_expandable_pool_memory_resource_mapped_bytes(handle(), out, err);
      },
      "expandable_pool_memory_resource::mapped_bytes"));
  }

  /** @brief The bytes the pool has handed out now (requests rounded up to 256). */
  [[nodiscard]] std::size_t used_bytes() const
  {
    return static_cast<std::size_t>(rmm::mr::detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) {
        return rmm_expandable_pool_memory_resource_used_bytes(handle(), out, err);
      },
      "expandable_pool_memory_resource::used_bytes"));
  }

  /**
   * @brief Gives back every mapped granule that lies wholly in free memory (between live blocks
   * too), after the work queued on the streams that freed into it; returns the bytes released.
   */
  std::size_t trim()
  {
    return static_cast<std::size_t>(rmm::mr::detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) { return rmm_expandable_pool_memory_resource_trim(handle(), out, err); },
      "expandable_pool_memory_resource::trim"));
  }

  /** @brief The release threshold; nullopt when there is none. */
  [[nodiscard]] std::optional<std::size_t> release_threshold() const
  {
    auto const bytes = rmm::mr::detail::get_value<std::uint64_t>(
      [&](std::uint64_t* out, rmm_error* err) {
        return rmm_expandable_pool_memory_resource_release_threshold(handle(), out, err);
      },
      "expandable_pool_memory_resource::release_threshold");
    if (bytes == RMM_SIZE_NONE) { return std::nullopt; }
    return static_cast<std::size_t>(bytes);
  }

  /** @brief Sets the release threshold (nullopt: none); it applies from the next free on. */
  void set_release_threshold(std::optional<std::size_t> bytes)
  {
    rmm_error err{};
    rmm::detail::check(rmm_expandable_pool_memory_resource_set_release_threshold(
                         handle(), rmm::mr::detail::size_or_none(bytes), &err),
                       err, "expandable_pool_memory_resource::set_release_threshold");
  }

  /**
   * @brief Exports the live allocation @p ptr of @p bytes to another process, which maps it with
   * imported_allocation::receive(): synchronizes @p stream (where its bytes were last written), then
   * sends its shareable handles over the connected Unix socket @p socket_fd. Keep the allocation
   * until the other process is done with it.
   * @throws rmm::logic_error when @p ptr is not a live allocation of @p bytes of this pool, or its
   * granules carry no shareable handle
   */
  void export_allocation(void* ptr, std::size_t bytes, cuda::stream_ref stream, int socket_fd) const
  {
    rmm_error err{};
    rmm::detail::check(
      rmm_expandable_pool_memory_resource_export(handle(), ptr, bytes, stream.get(), socket_fd, &err), err,
      "expandable_pool_memory_resource::export_allocation");
  }
};

static_assert(cuda::mr::resource_with<expandable_pool_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr::experimental
