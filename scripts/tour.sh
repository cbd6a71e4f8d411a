#!/usr/bin/env bash
# The README's tour command: builds everything, runs the Rust tour, then the same memory through
# Python. Works with or without a GPU (host mode says so on its first line).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../ci/lib.sh"
cd "$RMM_ROOT"

if ! command -v cargo >/dev/null 2>&1; then
    echo "ERROR: cargo not found: install Rust (https://rustup.rs) first" >&2
    exit 1
fi
need_python

log "build: cargo build --release --workspace"
cargo build --release --locked --workspace

log "Rust: cargo run --release -p rmm --example tour"
cargo run --release --locked -q -p rmm --example tour

log "Python: import rmm (rmm._rmm built from bindings-python)"
build_python_ext
PYTHONPATH="$RMM_ROOT/bindings-python/python" python3 - <<'PY'
import rmm
import rmm.mr

print(f"rmm {rmm.__version__} from {rmm.__file__}")
resources = [rmm.mr.SystemMemoryResource()]
if rmm.is_host_mode():
    print("No CUDA GPU found: Python runs on host memory too.")
else:
    free, total = rmm.mr.available_device_memory()
    print(f"device memory: {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB")
    resources.append(rmm.mr.CudaMemoryResource())
for mr in resources:
    sizes = [256, 4096, 1 << 20]
    ptrs = [mr.allocate(n) for n in sizes]
    for n, p in zip(sizes, ptrs):
        print(f"  {mr.name}: allocate({n:>7}) -> {p:#014x}  (multiple of 256: {p % 256 == 0})")
    for n, p in zip(sizes, ptrs):
        mr.deallocate(p, n)
    print(f"  {mr.name}: freed {len(ptrs)} allocations")
try:
    rmm.mr.SystemMemoryResource().allocate(1 << 50)
except MemoryError as e:
    print(f"  1 PiB request -> MemoryError: {e}")
PY

echo
echo "Tour done: the same Rust core served Rust and Python. Run 'bash scripts/test.sh' for the test suites."
