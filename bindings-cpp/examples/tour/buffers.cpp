// The tour's "buffers cross languages" stop, C++ side (an rmm-rs extension over RMM's C++ API):
// a std::unique_ptr<rmm::device_buffer> made here becomes a Python rmm.DeviceBuffer with no copy
// (<rmm/python.hpp>, RMM's DeviceBuffer.c_from_unique_ptr without Cython), and one comes back.
//
// Python loads this library with ctypes.PyDLL (the GIL stays held) and calls:
//   PyObject* rmm_tour_cpp_buffer_to_python(size_t bytes, int byte)  -> rmm.DeviceBuffer
//   PyObject* rmm_tour_cpp_buffer_from_python(PyObject* buffer)      -> (address, size, first byte)
// Errors: nullptr with a Python exception set (C++ exceptions are caught here).
#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/python.hpp>
#include <rmm/rmm_c.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>

#define RMM_TOUR_API extern "C" __attribute__((visibility("default")))

namespace {

PyObject* raise_from(std::exception const& e)
{
  PyErr_SetString(PyExc_RuntimeError, e.what());
  return nullptr;
}

void check(int status, rmm_error const& err)
{
  if (status != RMM_OK) { throw rmm::logic_error(err.message); }
}

}  // namespace

/// A device_buffer of `bytes` bytes set to `byte`, from the current device resource, handed to Python.
RMM_TOUR_API PyObject* rmm_tour_cpp_buffer_to_python(std::size_t bytes, int byte)
{
  try {
    auto buf = std::make_unique<rmm::device_buffer>(bytes, rmm::cuda_stream_default);
    rmm_error err{};
    check(rmm_memset_async(buf->data(), byte, buf->size(), nullptr, &err), err);
    check(rmm_stream_synchronize(nullptr, &err), err);
    std::printf("  [C++] std::unique_ptr<rmm::device_buffer> of %zu bytes at %p (every byte %d) -> rmm::to_python\n",
                buf->size(), buf->data(), byte);
    std::fflush(stdout);
    return rmm::to_python(std::move(buf));
  } catch (std::exception const& e) {
    return raise_from(e);
  }
}

/// Takes the memory of an rmm.DeviceBuffer (left empty) as a device_buffer, reads its first byte,
/// returns (address, size, first byte) and frees it here, through the resource that made it.
RMM_TOUR_API PyObject* rmm_tour_cpp_buffer_from_python(PyObject* obj)
{
  try {
    std::unique_ptr<rmm::device_buffer> buf = rmm::from_python(obj);
    if (!buf) { return nullptr; }
    unsigned char first = 0;
    rmm_error err{};
    if (buf->size() > 0) {
      check(rmm_memcpy_async(&first, buf->data(), 1, nullptr, &err), err);
      check(rmm_stream_synchronize(nullptr, &err), err);
    }
    std::printf("  [C++] rmm::from_python -> std::unique_ptr<rmm::device_buffer> of %zu bytes at %p, first byte %d;"
                " freed by C++\n", buf->size(), buf->data(), first);
    std::fflush(stdout);
    return Py_BuildValue("(KnI)", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(buf->data())),
                         static_cast<Py_ssize_t>(buf->size()), static_cast<unsigned>(first));
  } catch (std::exception const& e) {
    return raise_from(e);
  }
}
