/**
 * @file cuda_stream_pool.hpp
 * @brief rmm::cuda_stream_pool: a fixed set of owning streams handed out round robin (RMM 26.x names).
 */
#pragma once

#include <rmm/cuda_stream.hpp>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>

#include <atomic>
#include <cstddef>
#include <vector>

namespace rmm {

/**
 * @brief A pool of `pool_size` streams made at construction and destroyed with the pool.
 * get_stream() hands them out round robin through an atomic counter (thread-safe). Neither copyable
 * nor movable, as in RMM.
 */
class cuda_stream_pool {
 public:
  /** @brief The default number of streams. */
  static constexpr std::size_t default_size{16};

  /**
   * @brief Creates @p pool_size streams with @p flags on the current device.
   * @throws rmm::logic_error when @p pool_size is 0
   * @throws rmm::cuda_error when a stream cannot be made (always in host mode, where no GPU exists)
   */
  explicit cuda_stream_pool(std::size_t pool_size            = default_size,
                            cuda_stream::flags flags = cuda_stream::flags::sync_default)
  {
    if (pool_size == 0) { throw rmm::logic_error{"Stream pool size must be greater than zero"}; }
    streams_.reserve(pool_size);
    for (std::size_t i = 0; i < pool_size; ++i) { streams_.emplace_back(flags); }
  }
  ~cuda_stream_pool() = default;

  cuda_stream_pool(cuda_stream_pool&&)                 = delete;
  cuda_stream_pool(cuda_stream_pool const&)            = delete;
  cuda_stream_pool& operator=(cuda_stream_pool&&)      = delete;
  cuda_stream_pool& operator=(cuda_stream_pool const&) = delete;

  /** @brief The next stream, round robin. The view stays valid while the pool lives. */
  [[nodiscard]] rmm::cuda_stream_view get_stream() const noexcept
  {
    return cuda_stream_view{streams_[(next_stream_++) % streams_.size()].value()};
  }

  /** @brief The stream of id @p stream_id modulo the pool size (never throws for any id). */
  [[nodiscard]] rmm::cuda_stream_view get_stream(std::size_t stream_id) const
  {
    return streams_[stream_id % streams_.size()].view();
  }

  /** @brief The number of streams. */
  [[nodiscard]] std::size_t get_pool_size() const noexcept { return streams_.size(); }

 private:
  std::vector<rmm::cuda_stream> streams_;
  mutable std::atomic_size_t next_stream_{};
};

}  // namespace rmm
