"""Memory resources (RMM's ``rmm.mr``): every resource and adaptor, the per-device resource
functions and the logging switches; the same objects as ``rmm.pylibrmm.memory_resource``.

Every resource derives from :class:`DeviceMemoryResource` and offers
``allocate(nbytes, stream=DEFAULT_STREAM) -> int`` and ``deallocate(ptr, nbytes,
stream=DEFAULT_STREAM)``. The current device resource is the process's one: C++ and Rust code in
the same process (through ``librmm_rs.so``) see what :func:`set_current_device_resource` sets, and
:func:`get_current_device_resource` sees what they set.
"""

from rmm.pylibrmm.memory_resource import *  # noqa: F403
from rmm.pylibrmm.memory_resource import __all__  # noqa: F401
from rmm.pylibrmm.memory_resource import (  # noqa: F401 (rmm-rs extras, outside __all__)
    AlignedResourceAdaptor,
    SimulatedMemoryResource,
    ThreadSafeResourceAdaptor,
)
# rmm.mr.experimental is its own module, as in RMM (the star import brought the pylibrmm one).
import rmm.mr.experimental as experimental  # noqa: E402
