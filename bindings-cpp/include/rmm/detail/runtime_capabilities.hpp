/**
 * @file detail/runtime_capabilities.hpp
 * @brief RMM's capability probes (RMM 26.x names): `rmm::detail::runtime_async_alloc`,
 * `export_handle_type`, `hwdecompress`, `concurrent_managed_access`, `runtime_async_managed_alloc`
 * and `device_integrated_memory`, each with a static `is_supported()`.
 *
 * As in RMM these ask the CUDA runtime (`cudaDeviceGetAttribute`, `cudaDriverGetVersion`), so code
 * that calls them links libcudart; including the header links nothing. Without a driver or a device
 * (host mode) every probe answers false, except `hwdecompress`, which throws rmm::cuda_error as
 * RMM's does when the driver version cannot be read. Answers are cached per process, as in RMM
 * (`export_handle_type` asks each time).
 */
#pragma once

#include <rmm/cuda_device.hpp>
#include <rmm/detail/error.hpp>

#include <cuda_runtime_api.h>

namespace rmm::detail {

/** @brief The first driver version (CUDA 12.8) with hardware decompression. */
#define RMM_MIN_HWDECOMPRESS_CUDA_VERSION 12080

/** @brief The first driver and runtime version (CUDA 13.0) with managed memory pools. */
#define RMM_MIN_ASYNC_MANAGED_ALLOC_CUDA_VERSION 13000

/** @brief True when @p attribute of the current device is 1 (false when it cannot be read). */
inline bool current_device_attribute_is_one(cudaDeviceAttr attribute)
{
  int value{};
  auto const result = cudaDeviceGetAttribute(&value, attribute, rmm::get_current_cuda_device().value());
  return result == cudaSuccess and value == 1;
}

/** @brief Whether the current device supports stream-ordered memory pools (cudaMallocAsync). */
struct runtime_async_alloc {
  /** @brief True when cudaDevAttrMemoryPoolsSupported is 1 for the current device (first call's answer). */
  static bool is_supported()
  {
    static bool const supported = current_device_attribute_is_one(cudaDevAttrMemoryPoolsSupported);
    return supported;
  }
};

/** @brief Whether memory pools of the current device can export a given IPC handle type. */
struct export_handle_type {
  /**
   * @brief True when the current device's pools support @p handle_type (always for
   * cudaMemHandleTypeNone). False when the runtime does not know the attribute.
   * @throws rmm::cuda_error on any other CUDA error
   */
  static bool is_supported(cudaMemAllocationHandleType handle_type)
  {
    int supported_handle_types_bitmask{};
    if (cudaMemHandleTypeNone != handle_type) {
      auto const result = cudaDeviceGetAttribute(&supported_handle_types_bitmask,
                                                 cudaDevAttrMemoryPoolSupportedHandleTypes,
                                                 rmm::get_current_cuda_device().value());
      if (result == cudaErrorInvalidValue) { return false; }
      RMM_CUDA_TRY(result);
    }
    return (supported_handle_types_bitmask & handle_type) == handle_type;
  }
};

/** @brief Whether the driver supports hardware decompression (driver >= CUDA 12.8). */
struct hwdecompress {
  /**
   * @brief True when the driver is CUDA 12.8 or newer (first call's answer).
   * @throws rmm::cuda_error when the driver version cannot be read
   */
  static bool is_supported()
  {
    static bool const supported = [] {
      int driver_version{};
      RMM_CUDA_TRY(cudaDriverGetVersion(&driver_version));
      return driver_version >= RMM_MIN_HWDECOMPRESS_CUDA_VERSION;
    }();
    return supported;
  }
};

/** @brief Whether the current device supports concurrent managed access (needed for prefetching). */
struct concurrent_managed_access {
  /** @brief True when cudaDevAttrConcurrentManagedAccess is 1 for the current device (first call's answer). */
  static bool is_supported()
  {
    static bool const supported = current_device_attribute_is_one(cudaDevAttrConcurrentManagedAccess);
    return supported;
  }
};

/** @brief Whether managed memory pools are available (concurrent managed access and CUDA >= 13.0). */
struct runtime_async_managed_alloc {
  /** @brief True with concurrent managed access and a driver and runtime of CUDA 13.0 or newer. */
  static bool is_supported()
  {
    static auto const supported{[] {
      if (not concurrent_managed_access::is_supported()) { return false; }
      int driver_version{};
      auto const driver_result = cudaDriverGetVersion(&driver_version);
      int runtime_version{};
      auto const runtime_result = cudaRuntimeGetVersion(&runtime_version);
      return driver_result == cudaSuccess and runtime_result == cudaSuccess and
             driver_version >= RMM_MIN_ASYNC_MANAGED_ALLOC_CUDA_VERSION and
             runtime_version >= RMM_MIN_ASYNC_MANAGED_ALLOC_CUDA_VERSION;
    }()};
    return supported;
  }
};

/** @brief Whether the current device is integrated (shares physical memory with the host). */
struct device_integrated_memory {
  /** @brief True when cudaDevAttrIntegrated is 1 for the current device (first call's answer). */
  static bool is_supported()
  {
    static bool const integrated = current_device_attribute_is_one(cudaDevAttrIntegrated);
    return integrated;
  }
};

}  // namespace rmm::detail
