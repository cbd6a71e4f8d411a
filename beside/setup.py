"""Builds rmm_rs._resources: Cython against RAPIDS RMM 26.10's .pxd files and headers (from the
rmm-cu13 / librmm-cu13 wheels in the build environment), our headers (rmm_rs/include) and two
libraries: RMM's librmm.so (RMM's exception types) and our librmm_rs.so (rmm_rs/lib), both put
there by scripts/build-beside-wheel.sh.

g++ and libstdc++, as RMM's own wheels (one C++ ABI for the exceptions that cross between them).
The stable ABI of CPython 3.11 (abi3), as RMM's wheel: one wheel for every Python RMM supports.
"""

import os
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from build_support import CXX_FLAGS, LIMITED_API_MACROS, cuda_dirs, rmm_include_dirs, rmm_library_dirs  # noqa: E402

PKG = os.path.join(HERE, "rmm_rs")
ours_lib = os.path.join(PKG, "lib")
ours_include = os.path.join(PKG, "include")
for f in (os.path.join(ours_lib, "librmm_rs.so"), os.path.join(ours_include, "rmm_rs", "resource.hpp")):
    if not os.path.isfile(f):
        raise SystemExit(f"setup.py: {f} is missing (scripts/build-beside-wheel.sh puts it there)")

extension = Extension(
    "rmm_rs._resources",
    ["rmm_rs/_resources.pyx"],
    language="c++",
    include_dirs=[ours_include, *rmm_include_dirs(), cuda_dirs()[0]],
    library_dirs=[ours_lib, *rmm_library_dirs()],
    libraries=["rmm_rs", "rmm", "rapids_logger"],
    # librmm_rs.so beside us; RMM's libraries are loaded by `import rmm` before us (matched by SONAME),
    # and found in their wheels' folders otherwise.
    runtime_library_dirs=["$ORIGIN/lib", "$ORIGIN/../librmm/lib64", "$ORIGIN/../rapids_logger/lib64"],
    extra_compile_args=CXX_FLAGS,
    define_macros=LIMITED_API_MACROS,
    py_limited_api=True,
)

setup(
    ext_modules=cythonize(
        [extension],
        compiler_directives={"language_level": "3", "embedsignature": True},
        include_path=[HERE],
    ),
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
