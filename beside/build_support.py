"""Where RMM 26.10's wheels and the CUDA runtime put what a build against them needs: shared by
setup.py (the rmm_rs extension) and tests/ext/setup.py (the cuDF-style test extension)."""

import glob
import importlib.util
import os


def package_dir(name):
    """The folder of an installed Python package (librmm, rapids_logger, ...)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"setup.py: the build needs the Python package {name!r} (see pyproject.toml)")
    return list(spec.submodule_search_locations)[0]


def rmm_include_dirs():
    """RMM's headers with the CCCL RMM was built with (first), and rapids_logger's."""
    librmm = package_dir("librmm")
    return [
        os.path.join(librmm, "include", "rapids"),
        os.path.join(librmm, "include"),
        os.path.join(package_dir("rapids_logger"), "include"),
    ]


def rmm_library_dirs():
    return [os.path.join(package_dir("librmm"), "lib64"), os.path.join(package_dir("rapids_logger"), "lib64")]


def cuda_dirs():
    """(include, lib): cuda_runtime_api.h with crt/, and libcudart.so.13. $RMM_RS_CUDA_INCLUDE and
    $RMM_RS_CUDART_DIR when set, else the nvidia-cuda-runtime / nvidia-cuda-crt wheels."""
    include = os.environ.get("RMM_RS_CUDA_INCLUDE")
    if not include:
        spec = importlib.util.find_spec("nvidia")
        for root in spec.submodule_search_locations if spec else []:
            for inc in sorted(glob.glob(os.path.join(root, "cu*", "include")), reverse=True):
                if os.path.isfile(os.path.join(inc, "cuda_runtime_api.h")):
                    include = inc
                    break
    if not include:
        raise SystemExit("setup.py: no cuda_runtime_api.h (pip install nvidia-cuda-runtime nvidia-cuda-crt)")
    return include, os.environ.get("RMM_RS_CUDART_DIR", os.path.join(include, "..", "lib"))


# g++ with RMM's C++ dialect; the stable ABI of CPython 3.11, as RMM's own wheel.
CXX_FLAGS = ["-std=c++20", "-O2", "-Wno-unused-function", "-Wno-deprecated-declarations"]
LIMITED_API_MACROS = [("Py_LIMITED_API", "0x030B0000"), ("CYTHON_LIMITED_API", "1")]
