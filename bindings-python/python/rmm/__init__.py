"""rmm: GPU memory management, from rmm-rs (one Rust core for Python, C++ and Rust).

A drop-in for RAPIDS RMM's Python package: the same modules, names and behaviour. The compiled part
is ``rmm._rmm``; the names users import live in the pure-Python modules laid out as RMM's
(``rmm.mr``, ``rmm.pylibrmm.*``, ``rmm.statistics``, ``rmm.allocators.*``, ...).

rmm-rs extensions: :func:`is_host_mode` (no GPU: the same API on host memory),
:func:`get_include` and :func:`get_cmake_dir` (the C++ headers and CMake package in the wheel),
:class:`StridedMemoryView` (a typed strided view of any DLPack, CUDA Array Interface or buffer-protocol
object; ``rmm/librmm/strided_view.pxd`` declares its C struct for Cython) and DLPack 1.x on
:class:`DeviceBuffer`; :mod:`rmm.timeline` (the process's memory timeline, in PyTorch's memory_viz
format).
"""

from rmm import mr
from rmm._paths import get_cmake_dir, get_include
from rmm._rmm import StridedMemoryView, is_host_mode
from rmm._version import __git_commit__, __version__
from rmm.mr import disable_logging, enable_logging, get_log_filenames
from rmm.pylibrmm.device_buffer import DeviceBuffer
from rmm.pylibrmm.logger import (
    flush_logger,
    get_flush_level,
    get_logging_level,
    level_enum,
    set_flush_level,
    set_logging_level,
    should_log,
)
from rmm.rmm import (
    RMMError,
    is_initialized,
    register_reinitialize_hook,
    reinitialize,
    unregister_reinitialize_hook,
)

# As in RMM, `import rmm` makes these reachable as attributes (RMM imports them transitively).
import rmm.pylibrmm.stream  # noqa: E402
import rmm.statistics  # noqa: E402
import rmm.timeline  # noqa: E402  (rmm-rs extra: the memory timeline)

try:  # rmm._cuda.gpu needs cuda-python, which RMM requires and rmm-rs does not.
    import rmm._cuda.gpu  # noqa: E402
except ImportError:
    pass

__all__ = [
    "DeviceBuffer",
    "StridedMemoryView",
    "disable_logging",
    "RMMError",
    "enable_logging",
    "flush_logger",
    "get_cmake_dir",
    "get_flush_level",
    "get_include",
    "get_log_filenames",
    "get_logging_level",
    "is_host_mode",
    "is_initialized",
    "level_enum",
    "mr",
    "register_reinitialize_hook",
    "reinitialize",
    "set_flush_level",
    "set_logging_level",
    "should_log",
    "unregister_reinitialize_hook",
]
