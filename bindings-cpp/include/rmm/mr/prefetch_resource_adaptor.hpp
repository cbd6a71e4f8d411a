/**
 * @file prefetch_resource_adaptor.hpp
 * @brief rmm::mr::prefetch_resource_adaptor: prefetches each allocation to the current device on its stream (in librmm).
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
 * @brief Prefetches every allocation to the current device on the allocation's stream (a no-op for memory that
 * is not managed, and in host mode), so the first kernel touching it does not page-fault it over.
 *
 * A value type: copies share one librmm resource (== compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource passes its
 * librmm handle through.
 */
class prefetch_resource_adaptor : public detail::resource_over_upstream {
 public:
  /** @brief An adaptor over @p upstream. */
  explicit prefetch_resource_adaptor(detail::upstream_holder upstream)
    : resource_over_upstream{std::move(upstream),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) { return rmm_prefetch_resource_adaptor_new(up, out, err); },
        "prefetch_resource_adaptor"}
  {
  }
};

static_assert(cuda::mr::resource_with<prefetch_resource_adaptor, cuda::mr::device_accessible>);

}  // namespace rmm::mr
