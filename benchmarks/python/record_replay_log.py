"""Records a real allocation log for RMM's replay benchmark (REPLAY_BENCH -f LOG).

    python3 benchmarks/python/record_replay_log.py torch|cupy LOG [--steps N]

Sets a LoggingResourceAdaptor over a pool as the current device resource (RMM's public API, so
it runs with rmm-rs or with RAPIDS RMM on the path), then runs on the GPU:
  - torch: a short PyTorch training loop on `rmm_torch_allocator` (a small convolutional network
    on random images, forward, backward and an Adam step, batch sizes that vary);
  - cupy: a CuPy pipeline on `rmm_cupy_allocator` (elementwise arithmetic, reductions, sorting, an
    FFT and a matrix product on arrays of varying sizes, each step's temporaries freed).
The log is the logging adaptor's CSV (`Thread,Time,Action,Pointer,Size,Stream`). REPLAY_BENCH
supports only the default streams, so any other stream handle is written as the legacy default
stream (0x0) and counted on stdout; the allocations and their order stay as recorded.
"""

import argparse
import csv
import sys

import rmm
import rmm.mr
from workloads import conv_net, logged_pool


def torch_loop(steps):
    import torch

    from rmm.allocators.torch import rmm_torch_allocator

    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
    model, optimizer, loss_fn = conv_net(torch)
    for step in range(steps):
        batch = (32, 64, 48, 128)[step % 4]
        x = torch.randn(batch, 3, 64, 64, device="cuda")
        y = torch.randint(0, 10, (batch,), device="cuda")
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        del x, y, loss
    torch.cuda.synchronize()
    # Freed before the log is copied: REPLAY_BENCH allocates what the log never frees again on every
    # iteration.
    del model, optimizer


def cupy_loop(steps):
    import cupy

    from rmm.allocators.cupy import rmm_cupy_allocator

    cupy.cuda.set_allocator(rmm_cupy_allocator)
    cupy.cuda.set_pinned_memory_allocator(None)
    rng = cupy.random.default_rng(27)
    for step in range(steps):
        n = (1 << 16) << (step % 6)
        a = rng.standard_normal(n, dtype=cupy.float32)
        b = cupy.sqrt(cupy.abs(a * 3 + 1))
        total = float((a * b).sum())
        order = cupy.argsort(b)
        picked = a[order[: n // 4]]
        spectrum = cupy.fft.rfft(picked)
        m = 256 + 64 * (step % 5)
        mat = rng.standard_normal((m, m), dtype=cupy.float32)
        prod = mat @ mat.T
        if not (total == total and prod.shape == (m, m) and spectrum.size > 0):
            raise RuntimeError("a step went wrong")
        del a, b, order, picked, spectrum, mat, prod
    cupy.cuda.runtime.deviceSynchronize()
    cupy.cuda.set_allocator(None)


def default_streams_only(raw, path):
    """Copies the log `raw` to `path` with non-default stream handles written as 0x0 (REPLAY_BENCH
    refuses them); returns (events, rewritten)."""
    with open(raw, newline="") as f:
        rows = [row for row in csv.reader(f) if row]
    header, body = rows[0], rows[1:]
    column = header.index("Stream")
    default = {"0", "0x0", "0x1", "0x2", "1", "2"}
    rewritten = 0
    for row in body:
        if row and row[column].strip().lower() not in default:
            row[column] = "0x0"
            rewritten += 1
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header] + body)
    return len(body), rewritten


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=["torch", "cupy"])
    parser.add_argument("log")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    logged, raw = logged_pool(args.log)
    (torch_loop if args.workload == "torch" else cupy_loop)(args.steps)
    logged.flush()
    rows, rewritten = default_streams_only(logged.get_file_name() or raw, args.log)
    impl = "rmm-rs" if hasattr(rmm, "is_host_mode") else "rmm"
    print(f"{args.workload}: {rows} events in {args.log} ({impl} {rmm.__version__}); "
          f"{rewritten} on other streams written as 0x0")
    return 0 if rows > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
