/**
 * @file recording_resource_adaptor.hpp
 * @brief rmm::mr::recording_resource_adaptor: reports what passes through it to the memory timeline (in librmm; an rmm-rs extra).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <utility>

namespace rmm::mr {

/**
 * @brief Reports every allocation, free and out-of-memory failure through it to the process's memory
 * timeline while the timeline records (rmm::timeline::start), and only forwards otherwise.
 * rmm::timeline::start puts one over each device's resource by itself; make one yourself to record
 * a resource that is not a device's resource.
 *
 * A value type: copies share one librmm resource (== compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource passes its
 * librmm handle through.
 */
class recording_resource_adaptor : public detail::resource_over_upstream {
 public:
  /** @brief An adaptor over @p upstream. */
  explicit recording_resource_adaptor(detail::upstream_holder upstream)
    : resource_over_upstream{std::move(upstream),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) { return rmm_recording_resource_adaptor_new(up, out, err); },
        "recording_resource_adaptor"}
  {
  }
};

static_assert(cuda::mr::resource_with<recording_resource_adaptor, cuda::mr::device_accessible>);

}  // namespace rmm::mr
