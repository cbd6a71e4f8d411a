# rmm-rs resources as Cython subclasses of RAPIDS RMM's DeviceMemoryResource (cimportable): each
# holds a handle of librmm_rs.so in the C++ adapter rmm_rs::resource and points RMM's `c_ref` at it,
# so `mr.get_mr()` is a device_async_resource_ref to our engine.

from libcpp.memory cimport unique_ptr

from rmm.pylibrmm.memory_resource cimport DeviceMemoryResource, UpstreamResourceAdaptor

from rmm_rs._c cimport resource, rmm_error, rmm_resource


cdef class BaseMemoryResource(DeviceMemoryResource):
    cdef unique_ptr[resource] c_obj
    cdef _adopt(self, rmm_resource handle)


cdef class BaseResourceAdaptor(UpstreamResourceAdaptor):
    cdef unique_ptr[resource] c_obj
    cdef _adopt(self, rmm_resource handle)
    cdef _made(self, int status, rmm_resource upstream, rmm_resource* handle, rmm_error* err)


# The handle of one of our resources, BORROWED (valid while `mr` lives); TypeError for any other.
cdef rmm_resource borrow_handle(DeviceMemoryResource mr) except *

# An OWNING handle for `mr` as an upstream: our own handle (retained) for one of ours; for any other
# DeviceMemoryResource (RMM's), a handle that calls mr.get_mr() and keeps `mr` alive.
cdef rmm_resource upstream_handle(DeviceMemoryResource mr) except *
