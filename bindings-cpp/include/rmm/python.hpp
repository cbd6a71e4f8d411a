/**
 * @file python.hpp
 * @brief `std::unique_ptr<rmm::device_buffer>` and memory resources to and from Python with no copy
 * (an rmm-rs extension; RMM does this with Cython's `DeviceBuffer.c_from_unique_ptr`).
 *
 * ```cpp
 * #include <rmm/python.hpp>
 * PyObject* make(PyObject*, PyObject*) {       // a function of your extension module
 *   auto buf = std::make_unique<rmm::device_buffer>(1024, rmm::cuda_stream_view{});
 *   return rmm::to_python(std::move(buf));      // an rmm.DeviceBuffer that owns the memory
 * }
 * PyObject* take(PyObject*, PyObject* obj) {
 *   std::unique_ptr<rmm::device_buffer> buf = rmm::from_python(obj);   // obj is left empty
 *   if (!buf) { return nullptr; }               // TypeError / ValueError already set
 *   ...
 * }
 * ```
 *
 * Needs the GIL, <Python.h>, and the CCCL headers of the C++ API; the C-level functions
 * (rmm_device_buffer*, rmm_resource) are in <rmm/python_capsules.hpp>, which needs neither CCCL nor
 * the CUDA runtime headers. Errors: nullptr (std::nullopt for resources) with a Python
 * exception set; C++ exceptions of the buffer API become Python RuntimeErrors.
 */
#pragma once

#include <rmm/device_buffer.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/python_capsules.hpp>

#include <exception>
#include <memory>
#include <optional>

namespace rmm {

/**
 * @brief @p buf as a new `rmm.DeviceBuffer` that owns its memory (no copy); nullptr with a Python
 * exception set on failure (the memory is then freed). A null @p buf is a ValueError.
 */
inline PyObject* to_python(std::unique_ptr<device_buffer> buf)
{
  if (!buf) {
    PyErr_SetString(PyExc_ValueError, "rmm::to_python: the device_buffer must not be null");
    return nullptr;
  }
  rmm_device_buffer* handle = nullptr;
  try {
    handle = buf->release_c_handle();
  } catch (std::exception const& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  return python::to_python(handle);  // consumes the handle, success or not
}

/**
 * @brief The memory of @p obj (an `rmm.DeviceBuffer`, left empty as RMM's `c_release`, or an
 * "rmm.device_buffer.v1" capsule) as a `device_buffer` (no copy); null with a Python exception set
 * on failure.
 */
inline std::unique_ptr<device_buffer> from_python(PyObject* obj)
{
  rmm_device_buffer* handle = python::buffer_from_python(obj);
  if (handle == nullptr) { return nullptr; }
  try {
    return std::make_unique<device_buffer>(device_buffer::adopt_c_handle(handle));
  } catch (std::exception const& e) {
    rmm_device_buffer_free(handle);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

/**
 * @brief @p resource as a Python memory resource sharing the same object (an rmm resource passes its
 * librmm handle; any other CCCL resource goes behind librmm's C vtable, as set_current_device_resource
 * does); nullptr with a Python exception set on failure.
 */
inline PyObject* resource_to_python(mr::device_any_resource const& resource)
{
  try {
    auto handle = mr::detail::to_c_resource(resource);
    return python::resource_to_python(handle.handle());
  } catch (std::exception const& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

/**
 * @brief The resource of @p obj (a Python memory resource or an "rmm.memory_resource.v1" capsule) as
 * an owning `device_any_resource` that shares it; nullopt with a Python exception set on failure.
 */
inline std::optional<mr::device_any_resource> resource_from_python(PyObject* obj)
{
  rmm_resource handle = python::resource_from_python(obj);
  if (handle.vtable == nullptr) { return std::nullopt; }
  return mr::device_any_resource{mr::detail::c_resource::adopt(handle)};
}

}  // namespace rmm
