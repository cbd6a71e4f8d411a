#!/usr/bin/env bash
# Puts the CCCL (>= 3.1) and CUDA runtime headers that the C++ API needs under DEST, from PyPI wheels,
# without nvcc or a CUDA toolkit:
#   nvidia-cuda-cccl    -> DEST/nvidia/cu13/include/cccl   (cuda::mr::any_resource, resource_ref, ...)
#   nvidia-cuda-runtime -> DEST/nvidia/cu13/include        (cuda_runtime_api.h: CCCL only defines cuda::mr with it)
#   nvidia-cuda-crt     -> DEST/nvidia/cu13/include/crt    (host_defines.h, included by cuda_runtime_api.h)
# Nothing is linked from them: the headers are used host-only.
#
#   bindings-cpp/cmake/fetch-cccl.sh DEST
# Prints the include directories (CCCL first) as a CMake list on its last line. Does nothing but print
# when DEST already holds these versions.
set -euo pipefail

DEST=${1:?usage: fetch-cccl.sh DEST}
CCCL_WHEEL=${RMM_CCCL_WHEEL:-nvidia-cuda-cccl==13.3.5.0.6} # CCCL 3.5.0
RUNTIME_WHEEL=${RMM_CUDA_RUNTIME_WHEEL:-nvidia-cuda-runtime==13.0.96}
CRT_WHEEL=${RMM_CUDA_CRT_WHEEL:-nvidia-cuda-crt==13.0.88}
stamp="$DEST/.fetched"
want="$CCCL_WHEEL $RUNTIME_WHEEL $CRT_WHEEL"
inc="$DEST/nvidia/cu13/include"

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    python3 -m pip --version >/dev/null 2>&1 || { echo "ERROR: fetch-cccl.sh needs python3 -m pip" >&2; exit 1; }
    rm -rf "$DEST"
    mkdir -p "$DEST/wheels"
    # shellcheck disable=SC2086  # $want is the list of requirements
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$DEST/wheels" $want >&2
    python3 - "$DEST" "$DEST"/wheels/*.whl <<'PY'
import sys, zipfile
dest = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest, [n for n in z.namelist() if n.startswith("nvidia/cu13/include/")])
PY
    rm -rf "$DEST/wheels"
    for f in cccl/cuda/__memory_resource/any_resource.h cuda_runtime_api.h crt/host_defines.h; do
        [ -f "$inc/$f" ] || { echo "ERROR: $inc/$f is missing after unpacking $want" >&2; exit 1; }
    done
    echo "$want" >"$stamp"
fi
echo "$inc/cccl;$inc"
