// The "C++ library" of the example: plain C++ over CCCL's resource_ref and rmm::device_buffer, and the
// thin shims that the Rust crate's bridge declares (rmm::rs::resource_handle ->
// rmm::device_async_resource_ref, std::unique_ptr<rmm::device_buffer> both ways).
#pragma once

#include <rmm/cxx.hpp>
#include <rmm/cxx_device_buffer.hpp>
#include <rmm/device_buffer.hpp>

#include "rust/cxx.h"

#include <cstddef>
#include <cstdint>
#include <memory>

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

/// Library code (RMM's "a C++ function returns std::unique_ptr<rmm::device_buffer>"): a copy of the
/// @p size bytes at @p data in memory from @p mr, on the default stream.
std::unique_ptr<rmm::device_buffer> copy_to_device(void const* data, std::size_t size, rmm::mr::device_any_resource mr);

/// Library code taking a buffer: the sum of its bytes when @p host_accessible (device memory is not
/// read: then its size), after which the buffer is freed (through its resource, on its stream).
std::uint64_t consume(std::unique_ptr<rmm::device_buffer> buf, bool host_accessible);

/// The bridge's shim: a buffer holding @p bytes, from the Rust resource behind @p mr (shared with
/// the buffer, so it lives as long as the memory).
std::unique_ptr<rmm::device_buffer> make_buffer(rmm::rs::resource_handle mr, rust::Slice<const std::uint8_t> bytes);

/// The bridge's shim for consume().
std::uint64_t consume_buffer(std::unique_ptr<rmm::device_buffer> buf, bool host_accessible);

/// The buffer's data pointer, as an address (to check that a move copied nothing).
std::size_t buffer_address(rmm::device_buffer const& buf);

/// The buffer's size in bytes.
std::size_t buffer_size(rmm::device_buffer const& buf);

}  // namespace example
