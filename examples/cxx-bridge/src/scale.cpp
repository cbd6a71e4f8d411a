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

}  // namespace example
