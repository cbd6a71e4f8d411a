"""Where the wheel keeps the native library, the C++ headers and the CMake package (private;
:func:`rmm.get_include` and :func:`rmm.get_cmake_dir` are public)."""

from __future__ import annotations

import pathlib

_PACKAGE = pathlib.Path(__file__).resolve().parent

#: The file name of the native library: the C ABI and the process's one engine, which ``rmm._rmm``
#: links (the wheel carries it in ``rmm/lib/``).
NATIVE_LIBRARY = "librmm_rs.so"


def _existing(path: pathlib.Path, what: str) -> str:
    if not path.is_dir():
        raise FileNotFoundError(f"this rmm installation has no {what} ({path} does not exist)")
    return str(path)


def get_include() -> str:
    """The directory holding rmm-rs's C++ headers (``rmm/...``, ``rmm_c.h``), for
    ``-I$(python -c 'import rmm; print(rmm.get_include())')``.

    Raises FileNotFoundError when the installation does not carry them (e.g. a source checkout)."""
    return _existing(_PACKAGE / "include", "C++ headers")


def get_cmake_dir() -> str:
    """The directory holding rmm-rs's CMake package config, for
    ``cmake -Drmm_DIR=$(python -c 'import rmm; print(rmm.get_cmake_dir())')``.

    Raises FileNotFoundError when the installation does not carry it."""
    return _existing(_PACKAGE / "lib" / "cmake" / "rmm", "CMake package")
