"""Device buffers (RMM's ``rmm.pylibrmm.device_buffer``): :class:`DeviceBuffer` and the copy
functions between host memory, device memory and raw device pointers.

All are native (``rmm._rmm``): a buffer's memory comes from a resource of the one registry, and
freeing it releases the GIL and is ordered on the buffer's stream.
"""

from rmm._rmm import (
    DeviceBuffer,
    to_device,
    copy_ptr_to_host,
    copy_host_to_ptr,
    copy_device_to_ptr,
)

__all__ = ["DeviceBuffer", "copy_device_to_ptr", "copy_host_to_ptr", "copy_ptr_to_host", "to_device"]
