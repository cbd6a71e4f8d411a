// The tour's "buffers cross languages" stop, C++ side (an rmm-rs extension over RMM's C++ API):
// a std::unique_ptr<rmm::device_buffer> made here becomes a Python rmm.DeviceBuffer with no copy
// (<rmm/python.hpp>, RMM's DeviceBuffer.c_from_unique_ptr without Cython), and one comes back.
//
// Python loads this library with ctypes.PyDLL (the GIL stays held) and calls:
//   PyObject* rmm_tour_cpp_buffer_to_python(size_t bytes, int byte)  -> rmm.DeviceBuffer
//   PyObject* rmm_tour_cpp_buffer_from_python(PyObject* buffer)      -> (address, size, first byte)
//   int rmm_tour_cpp_read_view(const rmm_strided_view* view, float* out) (read from C)
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

/// Reads a strided view that Python acquired (StridedMemoryView.c_view_address) with no Python call:
/// prints its typed fields and the float at index [1][1], which it returns through *out.
/// Returns 0, or 1 after printing why (NULL, a released view, not a 2-d float32 view).
RMM_TOUR_API int rmm_tour_cpp_read_view(rmm_strided_view const* view, float* out)
{
  // librmm checks views of every copy of the core in the process: Python's module acquired this one.
  rmm_error err{};
  if (rmm_strided_view_check(view, &err) != RMM_OK) {
    std::printf("  [C]   not a live view: %s\n", err.message);
    return 1;
  }
  std::printf("  [C]   rmm_strided_view: ndim %d, shape {", view->ndim);
  for (int i = 0; i < view->ndim; ++i) { std::printf("%s%lld", i ? ", " : "", static_cast<long long>(view->shape[i])); }
  std::printf("}, strides {");
  for (int i = 0; i < view->ndim; ++i) {
    std::printf("%s%lld", i ? ", " : "", static_cast<long long>(view->strides[i]));
  }
  std::printf("} items, format \"%s\", device type %d, device_accessible %d, readonly %d\n", view->format,
              view->device_type, static_cast<int>(view->device_accessible), static_cast<int>(view->readonly));
  if (view->ndim != 2 || view->itemsize != sizeof(float)) {
    std::printf("  [C]   expected a 2-d float32 view\n");
    return 1;
  }
  auto const at = view->ptr + static_cast<std::uintptr_t>(view->byte_strides[0] + view->byte_strides[1]);
  float value = 0;
  if (rmm_memcpy_async(&value, reinterpret_cast<void const*>(at), sizeof(float), nullptr, &err) != RMM_OK ||
      rmm_stream_synchronize(nullptr, &err) != RMM_OK) {
    std::printf("  [C]   reading [1][1] failed: %s\n", err.message);
    return 1;
  }
  std::printf("  [C]   element [1][1] = %g\n", static_cast<double>(value));
  std::fflush(stdout);
  *out = value;
  return 0;
}
