"""Builds the cuDF-style test extension (cudf_style.pyx) against RAPIDS RMM 26.10's wheel only: RMM's
.pxd files, RMM's headers with their CCCL, librmm.so, and the CUDA runtime (headers and
libcudart_static.a from the nvidia-cuda-runtime/-crt wheels, or RMM_RS_CUDA_INCLUDE / RMM_RS_CUDART_DIR).
The stable ABI of CPython 3.11, so a build here imports on the GPU machine's Python 3.12.

    python setup.py build_ext --build-lib DIR
"""

import os
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from build_support import CXX_FLAGS, LIMITED_API_MACROS, cuda_dirs, rmm_include_dirs, rmm_library_dirs  # noqa: E402

cuda_include, cudart = cuda_dirs()
extension = Extension(
    "cudf_style",
    [os.path.join(HERE, "cudf_style.pyx")],
    language="c++",
    include_dirs=[HERE, *rmm_include_dirs(), cuda_include],
    library_dirs=[*rmm_library_dirs(), cudart],
    # RMM's users link the CUDA runtime (RMM's inline code calls it): statically, as RMM's librmm.so
    # does, so the extension needs no libcudart.so at run time.
    libraries=["rmm", ":libcudart_static.a", "rt", "pthread", "dl"],
    extra_compile_args=CXX_FLAGS,
    define_macros=LIMITED_API_MACROS,
    py_limited_api=True,
)

setup(name="cudf-style-test-extension", ext_modules=cythonize([extension], compiler_directives={"language_level": "3"}))
