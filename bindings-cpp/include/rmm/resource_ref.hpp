/**
 * @file resource_ref.hpp
 * @brief RMM's aliases of CCCL's type-erased resource references (RMM 26.x names).
 */
#pragma once

#include <rmm/detail/error.hpp>
#include <rmm/error.hpp>

#include <cuda/memory_resource>

namespace rmm {

/** @brief A non-owning reference to a synchronous device-accessible resource. */
using device_resource_ref = cuda::mr::synchronous_resource_ref<cuda::mr::device_accessible>;

/** @brief A non-owning reference to a stream-ordered device-accessible resource. */
using device_async_resource_ref = cuda::mr::resource_ref<cuda::mr::device_accessible>;

/** @brief A non-owning reference to a synchronous host-accessible resource. */
using host_resource_ref = cuda::mr::synchronous_resource_ref<cuda::mr::host_accessible>;

/** @brief A non-owning reference to a stream-ordered host-accessible resource. */
using host_async_resource_ref = cuda::mr::resource_ref<cuda::mr::host_accessible>;

/** @brief A non-owning reference to a synchronous host- and device-accessible resource. */
using host_device_resource_ref =
  cuda::mr::synchronous_resource_ref<cuda::mr::host_accessible, cuda::mr::device_accessible>;

/** @brief A non-owning reference to a stream-ordered host- and device-accessible resource. */
using host_device_async_resource_ref =
  cuda::mr::resource_ref<cuda::mr::host_accessible, cuda::mr::device_accessible>;

/**
 * @brief A device_async_resource_ref to `*res`.
 * @throws rmm::logic_error when @p res is null
 */
template <class Resource>
device_async_resource_ref to_device_async_resource_ref_checked(Resource* res)
{
  if (res == nullptr) { throw rmm::logic_error{"Unexpected null resource pointer."}; }
  return device_async_resource_ref{*res};
}

static_assert(std::is_convertible_v<host_device_async_resource_ref, device_async_resource_ref>);
static_assert(std::is_convertible_v<host_device_async_resource_ref, host_async_resource_ref>);
static_assert(std::is_convertible_v<host_device_resource_ref, device_resource_ref>);
static_assert(std::is_convertible_v<host_device_resource_ref, host_resource_ref>);

}  // namespace rmm
