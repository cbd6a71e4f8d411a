"""Memory resources (RMM's ``rmm.pylibrmm.memory_resource``; ``rmm.mr`` re-exports it): every
resource and adaptor, the per-device resource functions and the logging switches, defined in
``_memory_resource``, and the ``experimental`` resources."""

from rmm.pylibrmm.memory_resource import experimental
from rmm.pylibrmm.memory_resource._memory_resource import *  # noqa: F403
from rmm.pylibrmm.memory_resource._memory_resource import __all__ as _names
from rmm.pylibrmm.memory_resource._memory_resource import (  # rmm-rs extras, outside __all__
    AlignedResourceAdaptor,
    SimulatedMemoryResource,
    ThreadSafeResourceAdaptor,
)

__all__ = sorted([*_names, "experimental"], key=lambda name: (name[0].islower(), name))
