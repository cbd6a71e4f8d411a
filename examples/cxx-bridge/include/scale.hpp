// The "C++ library" of the example: plain C++ over CCCL's resource_ref, and the thin shim that the
// Rust crate's bridge declares (rmm::rs::resource_handle -> rmm::device_async_resource_ref).
#pragma once

#include <rmm/cxx.hpp>

#include "rust/cxx.h"

#include <cstddef>

namespace example {

/// Library code: allocates `count` blocks of `bytes` from `mr` on the default stream, writes and
/// reads back the first byte of each block when `host_accessible` (device memory is not touched),
/// frees them, and returns how many blocks it allocated. Throws what the resource throws.
std::size_t churn(rmm::device_async_resource_ref mr, std::size_t count, std::size_t bytes, bool host_accessible);

/// The bridge's shim: a Rust resource as a device_async_resource_ref.
std::size_t churn_through(rmm::rs::resource_handle mr, std::size_t count, std::size_t bytes, bool host_accessible);

/// The resource's name as C++ reads it through the handle.
rust::String resource_name(rmm::rs::resource_handle mr);

/// Whether two handles name equal resources (CCCL's resource_ref equality).
bool same_resource(rmm::rs::resource_handle a, rmm::rs::resource_handle b);

}  // namespace example
