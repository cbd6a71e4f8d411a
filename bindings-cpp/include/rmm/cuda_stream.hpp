/**
 * @file cuda_stream.hpp
 * @brief rmm::cuda_stream: an owning CUDA stream (RMM 26.x names), made and destroyed through
 * librmm's C ABI (rmm_stream_create / rmm_stream_destroy).
 */
#pragma once

#include <rmm/cuda_stream_view.hpp>
#include <rmm/error.hpp>
#include <rmm/rmm_c.h>

#include <cuda/stream_ref>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <utility>

namespace rmm {

/**
 * @brief An owning CUDA stream on the device that is current when it is made, destroyed with the
 * object. Move-only; a moved-from stream is invalid (is_valid() is false).
 */
class cuda_stream {
 public:
  /** @brief Creation flags (the runtime's cudaStream* flag values). */
  enum class flags : unsigned int {
    sync_default = cudaStreamDefault,     ///< synchronizes with the legacy default stream
    non_blocking = cudaStreamNonBlocking  ///< does not synchronize with the legacy default stream
  };

  /**
   * @brief Creates a stream with @p fl.
   * @throws rmm::cuda_error when CUDA fails, and in host mode (no GPU), where no stream can exist
   */
  cuda_stream(flags fl = flags::sync_default)  // NOLINT(google-explicit-constructor): as RMM
  {
    static_assert(static_cast<int>(flags::sync_default) == RMM_STREAM_SYNC_DEFAULT);
    static_assert(static_cast<int>(flags::non_blocking) == RMM_STREAM_NON_BLOCKING);
    void* created = nullptr;
    rmm_error err{};
    rmm::detail::check(rmm_stream_create(static_cast<int>(fl), &created, &err), err, "cuda_stream");
    stream_ = static_cast<cudaStream_t>(created);
  }

  cuda_stream(cuda_stream const&)            = delete;
  cuda_stream& operator=(cuda_stream const&) = delete;

  /** @brief Takes over @p other's stream; @p other becomes invalid. */
  cuda_stream(cuda_stream&& other) noexcept : stream_{std::exchange(other.stream_, nullptr)} {}

  /** @brief Destroys this stream and takes over @p other's; @p other becomes invalid. */
  cuda_stream& operator=(cuda_stream&& other) noexcept
  {
    if (this != &other) {
      destroy();
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }

  /** @brief Destroys the stream (work already queued on it still completes). */
  ~cuda_stream() { destroy(); }

  /** @brief Whether this object owns a stream (false once moved from). */
  [[nodiscard]] bool is_valid() const noexcept { return stream_ != nullptr; }

  /**
   * @brief The stream.
   * @throws rmm::logic_error for an invalid (moved-from) stream
   */
  [[nodiscard]] cudaStream_t value() const
  {
    if (!is_valid()) { throw rmm::logic_error{"cuda_stream::value: the stream is not valid (moved from)"}; }
    return stream_;
  }

  /**
   * @brief The stream, by explicit conversion (`static_cast<cudaStream_t>(stream)`), as in RMM.
   * Noexcept as in RMM: an invalid (moved-from) stream gives nullptr (RMM asserts in debug builds).
   */
  explicit operator cudaStream_t() const noexcept { return stream_; }

  /** @brief A view of the stream. @throws rmm::logic_error for an invalid stream */
  [[nodiscard]] cuda_stream_view view() const { return cuda_stream_view{value()}; }

  /** @brief A view of the stream. @throws rmm::logic_error for an invalid stream */
  operator cuda_stream_view() const { return view(); }  // NOLINT(google-explicit-constructor)

  /** @brief The stream as a CCCL stream_ref. @throws rmm::logic_error for an invalid stream */
  operator cuda::stream_ref() const { return cuda::stream_ref{value()}; }  // NOLINT

  /** @brief Blocks until all work queued on the stream has finished. @throws rmm::cuda_error */
  void synchronize() const { view().synchronize(); }

  /** @brief As synchronize(), printing a failure to stderr instead of throwing. */
  void synchronize_no_throw() const noexcept
  {
    if (is_valid()) { cuda_stream_view{stream_}.synchronize_no_throw(); }
  }

 private:
  void destroy() noexcept
  {
    if (stream_ == nullptr) { return; }
    rmm_error err{};
    if (int const status = rmm_stream_destroy(static_cast<void*>(std::exchange(stream_, nullptr)), &err);
        status != RMM_OK) {
      std::fprintf(stderr, "rmm::cuda_stream: destroying the stream failed: %s: %s\n", rmm_error_kind_name(status),
                   err.message);
    }
  }

  cudaStream_t stream_{nullptr};
};

}  // namespace rmm
