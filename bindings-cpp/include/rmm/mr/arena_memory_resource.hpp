/**
 * @file arena_memory_resource.hpp
 * @brief rmm::mr::arena_memory_resource: a per-stream arena allocator (in librmm).
 */
#pragma once

#include <rmm/aligned.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

namespace rmm::mr {

/**
 * @brief An arena allocator: per-thread/stream arenas over a global arena of superblocks taken from the upstream.
 *
 * A value type: copies share one librmm resource (== compares identity). The upstream may be any
 * `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource passes its
 * librmm handle through.
 */
class arena_memory_resource : public detail::resource_over_upstream {
 public:
  /**
   * @brief An arena over @p upstream_mr of @p arena_size bytes (nullopt: the default); @p dump_log_on_failure logs the arena state when it runs out.
   * @throws rmm::out_of_memory when the upstream cannot provide the arena
   */
  explicit arena_memory_resource(detail::upstream_holder upstream_mr, std::optional<std::size_t> arena_size = std::nullopt, bool dump_log_on_failure = false)
    : resource_over_upstream{std::move(upstream_mr),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return rmm_arena_memory_resource_new(up, detail::size_or_none(arena_size), dump_log_on_failure ? 1 : 0, out, err);
        },
        "arena_memory_resource"}
  {
  }
};

static_assert(cuda::mr::resource_with<arena_memory_resource, cuda::mr::device_accessible>);

}  // namespace rmm::mr
