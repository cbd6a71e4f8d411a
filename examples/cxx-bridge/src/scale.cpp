#include "rmm-example-cxx/include/scale.hpp"

#include <cuda/stream_ref>

#include <stdexcept>
#include <vector>

namespace example {

std::size_t churn(rmm::device_async_resource_ref mr, std::size_t count, std::size_t bytes, bool host_accessible)
{
  cuda::stream_ref stream{cudaStream_t{nullptr}};
  std::vector<void*> blocks;
  try {
    for (std::size_t i = 0; i < count; ++i) {
      void* p = mr.allocate(stream, bytes, 256);
      blocks.push_back(p);
      if (host_accessible && bytes > 0) {
        auto* byte = static_cast<unsigned char*>(p);
        *byte = static_cast<unsigned char>(i);
        if (*byte != static_cast<unsigned char>(i)) { throw std::runtime_error{"memory did not hold a byte"}; }
      }
    }
  } catch (...) {
    for (void* p : blocks) { mr.deallocate(stream, p, bytes, 256); }
    throw;
  }
  for (void* p : blocks) { mr.deallocate(stream, p, bytes, 256); }
  return blocks.size();
}

std::size_t churn_through(rmm::rs::resource_handle mr, std::size_t count, std::size_t bytes, bool host_accessible)
{
  return churn(rmm::device_async_resource_ref{mr}, count, bytes, host_accessible);
}

rust::String resource_name(rmm::rs::resource_handle mr) { return rust::String{mr.name()}; }

bool same_resource(rmm::rs::resource_handle a, rmm::rs::resource_handle b)
{
  return rmm::device_async_resource_ref{a} == rmm::device_async_resource_ref{b};
}

std::unique_ptr<rmm::device_buffer> copy_to_device(void const* data, std::size_t size, rmm::mr::device_any_resource mr)
{
  return std::make_unique<rmm::device_buffer>(data, size, rmm::cuda_stream_view{}, std::move(mr));
}

std::uint64_t consume(std::unique_ptr<rmm::device_buffer> buf, bool host_accessible)
{
  if (!buf) { throw std::invalid_argument{"consume: no buffer"}; }
  if (!host_accessible) { return buf->size(); }
  auto const* bytes = static_cast<unsigned char const*>(buf->data());
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < buf->size(); ++i) { sum += bytes[i]; }
  return sum;
}

std::unique_ptr<rmm::device_buffer> make_buffer(rmm::rs::resource_handle mr, rust::Slice<const std::uint8_t> bytes)
{
  return copy_to_device(bytes.data(), bytes.size(), rmm::rs::share(mr));
}

std::uint64_t consume_buffer(std::unique_ptr<rmm::device_buffer> buf, bool host_accessible)
{
  return consume(std::move(buf), host_accessible);
}

std::size_t buffer_address(rmm::device_buffer const& buf) { return reinterpret_cast<std::size_t>(buf.data()); }

std::size_t buffer_size(rmm::device_buffer const& buf) { return buf.size(); }

}  // namespace example
