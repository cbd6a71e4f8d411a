"""Experimental memory resource features that may change or be removed in future releases: the
names of ``rmm.pylibrmm.memory_resource.experimental``, as in RMM."""

from rmm.pylibrmm.memory_resource.experimental import *  # noqa: F403
from rmm.pylibrmm.memory_resource.experimental import __all__  # noqa: F401
