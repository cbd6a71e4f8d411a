"""rmm: GPU memory management, from rmm-rs (one Rust core for Python, C++ and Rust).

A drop-in for RAPIDS RMM's Python package: same module names and behaviour. The compiled part is
``rmm._rmm``; the names users import live in the pure-Python modules here (``rmm.mr``, ...).
"""

from rmm import _rmm, mr, statistics
from rmm._rmm import is_host_mode

__version__: str = _rmm.__version__

__all__ = ["__version__", "is_host_mode", "mr", "statistics"]
