/**
 * @file python_capsules.hpp
 * @brief Buffers and resources to and from Python with no copy, through librmm's C ABI and the
 * versioned capsules of rmm_c.h (an rmm-rs extension; RMM does this with Cython's
 * `DeviceBuffer.c_from_unique_ptr`). Needs only <Python.h> and <rmm/rmm_c.h>: C++ code that does not
 * use the CCCL-based API can include this header alone; <rmm/python.hpp> adds the
 * `std::unique_ptr<rmm::device_buffer>` and `device_any_resource` overloads.
 *
 * Every function needs the GIL. Functions returning PyObject* return a NEW reference, or nullptr
 * with a Python exception set; functions returning a handle return nullptr / the empty handle with a
 * Python exception set. Ownership of what they take is said per function.
 *
 * The model (docs/cross-language.md): a buffer MOVES between languages. The memory is freed once,
 * by its last owner, on the buffer's stream and device, through the resource that made it (even if
 * another resource is current by then). A resource is SHARED: every language holds a reference.
 */
#pragma once

#include <Python.h>

#include <rmm/rmm_c.h>

#include <cstring>

namespace rmm::python {

namespace detail {

/** @brief Sets a Python exception of @p type from a librmm error. */
inline void raise(PyObject* type, int status, rmm_error const& err, char const* what)
{
  PyErr_Format(type, "%s: %s (%s)", what, err.message, rmm_error_kind_name(status));
}

/** @brief Frees an unconsumed buffer capsule's export (a used one is the consumer's). */
inline void buffer_capsule_destructor(PyObject* capsule)
{
  if (PyCapsule_IsValid(capsule, RMM_DEVICE_BUFFER_CAPSULE)) {
    rmm_buffer_export_free(static_cast<rmm_buffer_export*>(PyCapsule_GetPointer(capsule, RMM_DEVICE_BUFFER_CAPSULE)));
  }
}

/** @brief Gives a resource capsule's reference back. */
inline void resource_capsule_destructor(PyObject* capsule)
{
  if (PyCapsule_IsValid(capsule, RMM_MEMORY_RESOURCE_CAPSULE)) {
    rmm_resource_export_free(
      static_cast<rmm_resource_export*>(PyCapsule_GetPointer(capsule, RMM_MEMORY_RESOURCE_CAPSULE)));
  }
}

/** @brief `getattr(import(module), cls).method(arg)`, a new reference or nullptr. */
inline PyObject* call_static(char const* module, char const* cls, char const* method, PyObject* arg)
{
  PyObject* mod = PyImport_ImportModule(module);
  if (mod == nullptr) { return nullptr; }
  PyObject* type = PyObject_GetAttrString(mod, cls);
  Py_DECREF(mod);
  if (type == nullptr) { return nullptr; }
  PyObject* result = PyObject_CallMethod(type, method, "O", arg);
  Py_DECREF(type);
  return result;
}

}  // namespace detail

/**
 * @brief A new "rmm.device_buffer.v1" capsule that owns @p buf's memory (no copy). @p buf (OWNING) is
 * always consumed: on failure its memory is freed.
 */
inline PyObject* buffer_to_capsule(rmm_device_buffer* buf)
{
  rmm_buffer_export* exported = nullptr;
  rmm_error err{};
  int const status = rmm_device_buffer_export(buf, &exported, &err);
  if (status != RMM_OK) {
    rmm_device_buffer_free(buf);
    detail::raise(PyExc_ValueError, status, err, "rmm_device_buffer_export");
    return nullptr;
  }
  PyObject* capsule = PyCapsule_New(exported, RMM_DEVICE_BUFFER_CAPSULE, detail::buffer_capsule_destructor);
  if (capsule == nullptr) { rmm_buffer_export_free(exported); }  // the memory is freed: buf was consumed
  return capsule;
}

/**
 * @brief Adopts the buffer of an "rmm.device_buffer.v1" capsule as a new OWNING rmm_device_buffer*
 * (no copy) and marks the capsule used. TypeError for anything else, ValueError for a used capsule or
 * an invalid export.
 */
inline rmm_device_buffer* buffer_from_capsule(PyObject* capsule)
{
  if (!PyCapsule_CheckExact(capsule)) {
    PyErr_Format(PyExc_TypeError, "expected a PyCapsule named '%s', got %s", RMM_DEVICE_BUFFER_CAPSULE,
                 Py_TYPE(capsule)->tp_name);
    return nullptr;
  }
  if (PyCapsule_IsValid(capsule, RMM_USED_DEVICE_BUFFER_CAPSULE)) {
    PyErr_Format(PyExc_ValueError, "this '%s' capsule was already consumed", RMM_DEVICE_BUFFER_CAPSULE);
    return nullptr;
  }
  auto* exported = static_cast<rmm_buffer_export*>(PyCapsule_GetPointer(capsule, RMM_DEVICE_BUFFER_CAPSULE));
  if (exported == nullptr) {
    PyErr_Clear();
    char const* name = PyCapsule_GetName(capsule);
    PyErr_Clear();
    if (name != nullptr && std::strncmp(name, "rmm.device_buffer.v", 19) == 0) {
      PyErr_Format(PyExc_ValueError, "capsule '%s' is a version this rmm does not read (it reads '%s')", name,
                   RMM_DEVICE_BUFFER_CAPSULE);
      return nullptr;
    }
    PyErr_Format(PyExc_TypeError, "expected a PyCapsule named '%s', got a capsule named '%s'",
                 RMM_DEVICE_BUFFER_CAPSULE, name == nullptr ? "(null)" : name);
    return nullptr;
  }
  rmm_device_buffer* buf = nullptr;
  rmm_error err{};
  int const status = rmm_device_buffer_import(exported, &buf, &err);
  if (status != RMM_OK) {
    detail::raise(PyExc_ValueError, status, err, "rmm_device_buffer_import");
    return nullptr;
  }
  // The export is consumed: the capsule must not free it again.
  if (PyCapsule_SetName(capsule, RMM_USED_DEVICE_BUFFER_CAPSULE) != 0) { PyCapsule_SetDestructor(capsule, nullptr); }
  return buf;
}

/**
 * @brief @p buf (OWNING, always consumed: freed on failure) as a new `rmm.DeviceBuffer` that owns
 * its memory (no copy): RMM's `DeviceBuffer.c_from_unique_ptr`.
 */
inline PyObject* to_python(rmm_device_buffer* buf)
{
  PyObject* capsule = buffer_to_capsule(buf);
  if (capsule == nullptr) { return nullptr; }
  PyObject* result = detail::call_static("rmm", "DeviceBuffer", "_from_capsule", capsule);
  Py_DECREF(capsule);  // an unconsumed capsule (the call failed) frees the memory here
  return result;
}

/**
 * @brief Takes the memory of @p obj, an `rmm.DeviceBuffer` (left empty, as RMM's `c_release`) or an
 * "rmm.device_buffer.v1" capsule, as a new OWNING rmm_device_buffer* (no copy).
 */
inline rmm_device_buffer* buffer_from_python(PyObject* obj)
{
  if (PyCapsule_CheckExact(obj)) { return buffer_from_capsule(obj); }
  PyObject* capsule = PyObject_CallMethod(obj, "_to_capsule", nullptr);
  if (capsule == nullptr) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "expected an rmm.DeviceBuffer or a '%s' capsule, got %s",
                   RMM_DEVICE_BUFFER_CAPSULE, Py_TYPE(obj)->tp_name);
    }
    return nullptr;
  }
  rmm_device_buffer* buf = buffer_from_capsule(capsule);
  Py_DECREF(capsule);
  return buf;
}

/** @brief A new "rmm.memory_resource.v1" capsule holding a reference to @p resource (BORROWED). */
inline PyObject* resource_to_capsule(rmm_resource resource)
{
  rmm_resource_export* exported = nullptr;
  rmm_error err{};
  int const status = rmm_resource_export_new(resource, &exported, &err);
  if (status != RMM_OK) {
    detail::raise(PyExc_ValueError, status, err, "rmm_resource_export_new");
    return nullptr;
  }
  PyObject* capsule = PyCapsule_New(exported, RMM_MEMORY_RESOURCE_CAPSULE, detail::resource_capsule_destructor);
  if (capsule == nullptr) { rmm_resource_export_free(exported); }
  return capsule;
}

/**
 * @brief @p resource (BORROWED) as a Python memory resource (the most specific class rmm knows for
 * it; a statistics adaptor made in C++ reads its counters in Python) sharing the same object.
 */
inline PyObject* resource_to_python(rmm_resource resource)
{
  PyObject* capsule = resource_to_capsule(resource);
  if (capsule == nullptr) { return nullptr; }
  PyObject* result = detail::call_static("rmm.mr", "DeviceMemoryResource", "_from_capsule", capsule);
  Py_DECREF(capsule);
  return result;
}

/**
 * @brief The resource of @p obj, a Python memory resource or an "rmm.memory_resource.v1" capsule, as
 * a new OWNING handle (release it with rmm_resource_release); the empty handle on error.
 */
inline rmm_resource resource_from_python(PyObject* obj)
{
  rmm_resource out{nullptr, nullptr};
  PyObject* capsule = nullptr;
  if (PyCapsule_CheckExact(obj)) {
    capsule = obj;
    Py_INCREF(capsule);
  } else {
    capsule = PyObject_CallMethod(obj, "_to_capsule", nullptr);
    if (capsule == nullptr) {
      if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "expected an rmm memory resource or a '%s' capsule, got %s",
                     RMM_MEMORY_RESOURCE_CAPSULE, Py_TYPE(obj)->tp_name);
      }
      return out;
    }
  }
  auto* exported = static_cast<rmm_resource_export*>(PyCapsule_GetPointer(capsule, RMM_MEMORY_RESOURCE_CAPSULE));
  if (exported == nullptr) {
    PyErr_Clear();
    char const* name = PyCapsule_GetName(capsule);
    PyErr_Format(PyExc_TypeError, "expected a PyCapsule named '%s', got a capsule named '%s'",
                 RMM_MEMORY_RESOURCE_CAPSULE, name == nullptr ? "(null)" : name);
    Py_DECREF(capsule);
    return out;
  }
  rmm_error err{};
  int const status = rmm_resource_import(exported, &out, &err);
  Py_DECREF(capsule);
  if (status != RMM_OK) { detail::raise(PyExc_ValueError, status, err, "rmm_resource_import"); }
  return out;
}

}  // namespace rmm::python
