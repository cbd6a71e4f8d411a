/**
 * @file cuda_device.hpp
 * @brief rmm::cuda_device_id (RMM 26.x name).
 *
 * Unlike RMM there is no default constructor (it would need the CUDA runtime to ask for the current
 * device): use the `*_current_device_*` functions of per_device_resource.hpp for the current device.
 */
#pragma once

namespace rmm {

/** @brief A strongly typed CUDA device ordinal. */
struct cuda_device_id {
  /** @brief The type of the ordinal. */
  using value_type = int;

  /** @brief Wraps the ordinal @p dev_id. */
  constexpr explicit cuda_device_id(value_type dev_id) noexcept : id_{dev_id} {}

  /** @brief The ordinal. */
  [[nodiscard]] constexpr value_type value() const noexcept { return id_; }

  /** @brief Equality of ordinals. */
  [[nodiscard]] constexpr friend bool operator==(cuda_device_id lhs, cuda_device_id rhs) noexcept
  {
    return lhs.value() == rhs.value();
  }
  /** @brief Inequality of ordinals. */
  [[nodiscard]] constexpr friend bool operator!=(cuda_device_id lhs, cuda_device_id rhs) noexcept
  {
    return lhs.value() != rhs.value();
  }

 private:
  value_type id_;
};

}  // namespace rmm
