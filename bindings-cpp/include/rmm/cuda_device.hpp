/**
 * @file cuda_device.hpp
 * @brief rmm::cuda_device_id and the device helpers of RMM 26.x (current device, device count,
 * available memory, cuda_set_device_raii), over librmm's C ABI instead of the CUDA runtime.
 *
 * Host mode (no driver or no GPU): the current device is 0, the registry's host-memory slot, so
 * `cuda_device_id{}` and `cuda_set_device_raii{cuda_device_id{0}}` work; counting devices and
 * asking for their memory throw rmm::cuda_error.
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/error.hpp>
#include <rmm/rmm_c.h>

#include <cstddef>
#include <utility>

namespace rmm {

struct cuda_device_id;
cuda_device_id get_current_cuda_device();

/** @brief A strongly typed CUDA device ordinal. */
struct cuda_device_id {
  /** @brief The type of the ordinal. */
  using value_type = int;

  /** @brief The calling thread's current device (0 in host mode, or if it cannot be determined). */
  cuda_device_id() noexcept;

  /** @brief Wraps the ordinal @p dev_id. */
  constexpr explicit cuda_device_id(value_type dev_id) noexcept : id_{dev_id} {}

  /** @brief The ordinal. */
  [[nodiscard]] constexpr value_type value() const noexcept { return id_; }

  /** @brief Ordinals compare as ints. */
  [[nodiscard]] constexpr friend bool operator==(cuda_device_id lhs, cuda_device_id rhs) noexcept
  {
    return lhs.value() == rhs.value();
  }
  /** @brief Ordinals compare as ints. */
  [[nodiscard]] constexpr friend bool operator!=(cuda_device_id lhs, cuda_device_id rhs) noexcept
  {
    return lhs.value() != rhs.value();
  }
  /** @brief Ordinals compare as ints. */
  [[nodiscard]] constexpr friend bool operator<(cuda_device_id lhs, cuda_device_id rhs) noexcept
  {
    return lhs.value() < rhs.value();
  }
  /** @brief Ordinals compare as ints. */
  [[nodiscard]] constexpr friend bool operator<=(cuda_device_id lhs, cuda_device_id rhs) noexcept
  {
    return lhs.value() <= rhs.value();
  }
  /** @brief Ordinals compare as ints. */
  [[nodiscard]] constexpr friend bool operator>(cuda_device_id lhs, cuda_device_id rhs) noexcept
  {
    return lhs.value() > rhs.value();
  }
  /** @brief Ordinals compare as ints. */
  [[nodiscard]] constexpr friend bool operator>=(cuda_device_id lhs, cuda_device_id rhs) noexcept
  {
    return lhs.value() >= rhs.value();
  }

 private:
  value_type id_;
};

/** @brief The calling thread's current device (0 in host mode). Throws rmm::cuda_error on a driver failure. */
inline cuda_device_id get_current_cuda_device()
{
  int device = 0;
  rmm_error err{};
  detail::check(rmm_device_get_current(&device, &err), err, "get_current_cuda_device");
  return cuda_device_id{device};
}

inline cuda_device_id::cuda_device_id() noexcept : id_{0}
{
  int device = 0;
  rmm_error err{};
  // The default constructor is noexcept in RMM: a failed query leaves device 0, the registry's default.
  if (rmm_device_get_current(&device, &err) == RMM_OK) { id_ = device; }
}

/** @brief The number of CUDA devices. Throws rmm::cuda_error in host mode. */
inline int get_num_cuda_devices()
{
  int count = 0;
  rmm_error err{};
  detail::check(rmm_device_count(&count, &err), err, "get_num_cuda_devices");
  return count;
}

/** @brief `{free, total}` bytes of the current device's memory. Throws rmm::cuda_error in host mode. */
inline std::pair<std::size_t, std::size_t> available_device_memory()
{
  std::size_t free = 0;
  std::size_t total = 0;
  rmm_error err{};
  detail::check(rmm_available_device_memory(&free, &total, &err), err, "available_device_memory");
  return {free, total};
}

/**
 * @brief @p percent percent of the current device's free memory, aligned down to
 * CUDA_ALLOCATION_ALIGNMENT (what RMM's examples pass as a pool's initial size).
 */
inline std::size_t percent_of_free_device_memory(int percent)
{
  auto const free = available_device_memory().first;
  auto const fraction = static_cast<double>(percent) / 100.0;
  return align_down(static_cast<std::size_t>(static_cast<double>(free) * fraction), CUDA_ALLOCATION_ALIGNMENT);
}

/**
 * @brief Makes a device current for the lifetime of this object and restores the previous one
 * after (nothing happens when it is already current, or for a negative id).
 */
struct cuda_set_device_raii {
  /** @brief Makes @p dev_id current when it is not. Throws rmm::logic_error for a device that does not exist. */
  explicit cuda_set_device_raii(cuda_device_id dev_id)
    : old_device_{get_current_cuda_device()}, needs_reset_{dev_id.value() >= 0 && old_device_ != dev_id}
  {
    if (needs_reset_) {
      rmm_error err{};
      detail::check(rmm_device_set_current(dev_id.value(), &err), err, "cuda_set_device_raii");
    }
  }
  /** @brief Restores the previous device (errors are ignored: a destructor must not throw). */
  ~cuda_set_device_raii() noexcept
  {
    if (needs_reset_) {
      rmm_error err{};
      (void)rmm_device_set_current(old_device_.value(), &err);
    }
  }
  cuda_set_device_raii(cuda_set_device_raii const&)            = delete;
  cuda_set_device_raii& operator=(cuda_set_device_raii const&) = delete;
  cuda_set_device_raii(cuda_set_device_raii&&)                 = delete;
  cuda_set_device_raii& operator=(cuda_set_device_raii&&)      = delete;

 private:
  cuda_device_id old_device_;
  bool needs_reset_;
};

}  // namespace rmm
