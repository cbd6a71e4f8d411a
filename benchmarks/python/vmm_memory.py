"""Issue 28's memory benchmark: how much device memory each allocator holds for the same work.

    python3 vmm_memory.py record torch|cupy LOG        a trace, through rmm's logging adaptor
    python3 vmm_memory.py torch-caching [--expandable] PyTorch's own allocator on the same loop
    python3 vmm_memory.py trim                         the loop on the expandable pool, then trim
    python3 vmm_memory.py replay-rmm LOG SERIES.csv    LOG on RAPIDS RMM's pool (RMM on the path)
    python3 vmm_memory.py summarize DIR                DIR's results as summary.csv and figures

Workloads (the same schedule every run: seeded, sizes from the step number):
  - torch: a small transformer language model trained with Adam on two streams: batches of 8 to
    48 sequences of 64 to 512 tokens are made on a side stream while the main stream trains, and
    every fourth step evaluates a batch on the side stream;
  - cupy: a CuPy pipeline with large temporaries on two streams: arrays of 64 to 768 MiB, sorts,
    FFTs, reductions and matrix products, each step's temporaries freed.

`record` sets a LoggingResourceAdaptor over rmm-rs's pool as the current device resource and keeps
every stream in the log (rmm-replay replays streams as streams). `torch-caching`, `trim` and
`record` print one JSON line; `replay-rmm` writes the series CSV of rmm-replay --series
(`event,seconds,live_bytes,reserved_bytes`, reserved = RMM's pool_size()) and prints a JSON line.
`summarize` reads DIR/*.json and DIR/series-*.csv (see scripts/gpu-vmm.sh) and writes
DIR/summary.csv and, with matplotlib, DIR/figure-<trace>.png (mapped or reserved, and live bytes,
over the trace, one line per allocator).
"""

import argparse
import csv
import json
import os
import sys

MiB = 1 << 20
TORCH_STEPS = 40
CUPY_STEPS = 24


def torch_model(torch):
    """A 4-layer transformer language model (d_model 512, vocabulary 8192) with Adam."""
    torch.manual_seed(28)

    class LanguageModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(8192, 512)
            layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.head = torch.nn.Linear(512, 8192)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)))

    model = LanguageModel().cuda()
    return model, torch.optim.Adam(model.parameters(), lr=1e-4), torch.nn.CrossEntropyLoss()


def torch_loop(torch, steps=TORCH_STEPS):
    """Trains on two streams; returns (model, optimizer) so callers decide what stays live."""
    model, optimizer, loss_fn = torch_model(torch)
    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    for step in range(steps):
        batch = (8, 32, 16, 48, 24)[step % 5]
        seq = (64, 256, 512, 128, 384, 192)[step % 6]
        with torch.cuda.stream(side):
            tokens = torch.randint(0, 8192, (batch, seq + 1), device="cuda")
            inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        main.wait_stream(side)
        inputs.record_stream(main)
        targets.record_stream(main)
        optimizer.zero_grad(set_to_none=True)
        logits = model(inputs)
        loss = loss_fn(logits.reshape(-1, 8192), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        # rmm_torch_allocator frees on the stream a block was made on (record_stream is a no-op for
        # a pluggable allocator): the side stream must not reuse the batch before main is done.
        side.wait_stream(main)
        del logits, loss, inputs, targets, tokens
        if step % 4 == 3:
            side.wait_stream(main)
            with torch.cuda.stream(side), torch.no_grad():
                probe = torch.randint(0, 8192, (batch, seq), device="cuda")
                float(model(probe).float().mean())
                del probe
            main.wait_stream(side)
    torch.cuda.synchronize()
    return model, optimizer


def cupy_loop(cupy, steps=CUPY_STEPS):
    rng = cupy.random.default_rng(28)
    streams = (cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True))
    for step in range(steps):
        with streams[step % 2]:
            n = (16 * MiB) << (step % 4)  # float32: 64 MiB to 512 MiB
            a = rng.standard_normal(n, dtype=cupy.float32)
            b = cupy.sqrt(cupy.abs(a * 3 + 1))
            order = cupy.argsort(b[: n // 2])
            picked = a[order]
            spectrum = cupy.fft.rfft(picked[: n // 8])
            m = 2048 + 1024 * (step % 3)
            mat = rng.standard_normal((m, m), dtype=cupy.float32)
            prod = mat @ mat.T
            total = float((a * b).sum()) + float(prod.trace()) + float(abs(spectrum[1]))
            if total != total:
                raise RuntimeError("a step went wrong")
            del a, b, order, picked, spectrum, mat, prod
    cupy.cuda.runtime.deviceSynchronize()


def record(args):
    from workloads import logged_pool

    logged, raw = logged_pool(args.log)
    if args.workload == "torch":
        import torch

        from rmm.allocators.torch import rmm_torch_allocator

        torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
        model, optimizer = torch_loop(torch)
        del model, optimizer
        torch.cuda.synchronize()
    else:
        import cupy

        from rmm.allocators.cupy import rmm_cupy_allocator

        cupy.cuda.set_allocator(rmm_cupy_allocator)
        cupy_loop(cupy)
        cupy.cuda.set_allocator(None)
    logged.flush()
    with open(logged.get_file_name() or raw, newline="") as f:
        rows = [row for row in csv.reader(f) if row]
    with open(args.log, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    streams = {row[rows[0].index("Stream")] for row in rows[1:]}
    print(json.dumps({"record": args.workload, "events": len(rows) - 1, "streams": len(streams), "log": args.log}))
    return 0 if len(rows) > 1 else 1


def torch_caching(args):
    # PYTORCH_CUDA_ALLOC_CONF must be set before torch initializes CUDA.
    if args.expandable:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    else:
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    import torch

    model, optimizer = torch_loop(torch)
    del model, optimizer
    torch.cuda.synchronize()
    name = "torch_caching_expandable" if args.expandable else "torch_caching"
    print(json.dumps({
        "allocator": name,
        "trace": "torch",
        "peak_live_bytes": torch.cuda.max_memory_allocated(),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
    }))
    return 0


def trim(args):
    import torch

    import rmm
    import rmm.mr
    from rmm.allocators.torch import rmm_torch_allocator
    from rmm.mr.experimental import ExpandablePoolMemoryResource

    pool = ExpandablePoolMemoryResource()
    stats = rmm.mr.StatisticsResourceAdaptor(pool)
    rmm.mr.set_current_device_resource(stats)
    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
    model, optimizer = torch_loop(torch)
    # The model and Adam's states stay live: allocated among the first steps' activations, they are
    # spread over the range.
    torch.cuda.synchronize()
    before = pool.statistics()
    released = pool.trim()
    after = pool.statistics()
    unused = before["mapped_bytes"] - before["used_bytes"]
    print(json.dumps({
        "allocator": "expandable_pool_in_process",
        "trace": "torch",
        "peak_live_bytes": stats.allocation_counts.peak_bytes,
        "peak_reserved_bytes": before["peak_mapped_bytes"],
        "live_at_trim_bytes": before["used_bytes"],
        "mapped_before_trim_bytes": before["mapped_bytes"],
        "trim_released_bytes": released,
        "trim_returned_share": released / unused if unused else 1.0,
        "mapped_after_trim_bytes": after["mapped_bytes"],
        "granularity": before["granularity"],
    }))
    del model, optimizer
    return 0


def replay_rmm(args):
    """Replays LOG on RAPIDS RMM's pool (starting empty, as rmm-replay's pool_on_demand), one
    RMM stream per logged stream, in the log's order; writes the series and prints the peaks."""
    import rmm
    import rmm.mr
    from rmm.pylibrmm.stream import DEFAULT_STREAM, Stream

    # --host: system memory under the pool, to check this replayer without a GPU.
    upstream = rmm.mr.SystemMemoryResource() if args.host else rmm.mr.CudaMemoryResource()
    pool = rmm.mr.PoolMemoryResource(upstream, initial_pool_size=0)
    with open(args.log, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        col = {name: header.index(name) for name in ("Action", "Pointer", "Size", "Stream")}
        rows = [row for row in reader if row]
    streams, live, series = {}, {}, []
    live_bytes = peak_live = peak_reserved = failures = 0
    default = {"0", "0x0", "0x1", "0x2", "1", "2"}

    def stream_of(handle):
        if args.host or handle.strip().lower() in default:
            return DEFAULT_STREAM
        if handle not in streams:
            streams[handle] = Stream()
        return streams[handle]

    for i, row in enumerate(rows):
        action = row[col["Action"]].strip()
        ptr, size, stream = row[col["Pointer"]], int(row[col["Size"]]), stream_of(row[col["Stream"]])
        if action == "allocate":
            try:
                live[ptr] = (pool.allocate(size, stream), size, stream)
                live_bytes += size
            except MemoryError:
                failures += 1
        elif action == "free" and ptr in live:
            p, size, _ = live.pop(ptr)
            pool.deallocate(p, size, stream)
            live_bytes -= size
        else:
            continue
        reserved = pool.pool_size()
        peak_live, peak_reserved = max(peak_live, live_bytes), max(peak_reserved, reserved)
        series.append((i, "", live_bytes, reserved))
    for p, size, stream in live.values():
        pool.deallocate(p, size, stream)
    with open(args.series, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["event", "seconds", "live_bytes", "reserved_bytes"])
        w.writerows(series)
    print(json.dumps({
        # rmm-rs has is_host_mode(), RAPIDS RMM does not.
        "allocator": ("rmm-rs" if hasattr(rmm, "is_host_mode") else "rmm_" + rmm.__version__) + "_pool",
        "peak_live_bytes": peak_live,
        "peak_reserved_bytes": peak_reserved,
        "allocation_failures": failures,
    }))
    return 0 if failures == 0 else 1


def summarize(args):
    """DIR/*.json (one JSON object each, with `allocator`, `trace`, peaks) into summary.csv and the
    figures from DIR/series-<trace>-<allocator>.csv."""
    rows = []
    for name in sorted(os.listdir(args.dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(args.dir, name)) as f:
            try:
                r = json.load(f)
            except json.JSONDecodeError:
                continue
        # rmm-replay's --json names neither: the file is <trace>-<allocator>.json.
        trace, _, allocator = name[:-5].partition("-")
        live, reserved = r.get("peak_live_bytes"), r.get("peak_reserved_bytes")
        rows.append({
            "trace": r.get("trace", trace),
            "allocator": r.get("allocator", allocator),
            "peak_live_bytes": live,
            "peak_reserved_bytes": reserved,
            "reserved_over_live": round(reserved / live, 4) if live and reserved else "",
            "allocation_failures": r.get("allocation_failures", 0),
            "trim_returned_share": r.get("trim_returned_share", ""),
        })
    with open(os.path.join(args.dir, "summary.csv"), "w", newline="") as f:
        fields = ["trace", "allocator", "peak_live_bytes", "peak_reserved_bytes", "reserved_over_live",
                  "allocation_failures", "trim_returned_share"]
        w = csv.DictWriter(f, fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(f"{r['trace']:6} {r['allocator']:28} peak live {r['peak_live_bytes'] or 0:>14,} "
              f"peak held {r['peak_reserved_bytes'] or 0:>14,}  x{r['reserved_over_live']}"
              + (f"  trim returned {r['trim_returned_share']:.1%}" if r["trim_returned_share"] != "" else ""))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no figure (rmm-replay's --plot PNGs are in the directory)")
        return 0
    series = {}
    for name in os.listdir(args.dir):
        if name.startswith("series-") and name.endswith(".csv"):
            trace, allocator = name[len("series-"):-4].split("-", 1)
            with open(os.path.join(args.dir, name), newline="") as f:
                data = list(csv.DictReader(f))
            series.setdefault(trace, {})[allocator] = data
    for trace, by_allocator in series.items():
        fig, ax = plt.subplots(figsize=(12, 6))
        live_drawn = False
        for allocator, data in sorted(by_allocator.items()):
            x = [int(d["event"]) for d in data]
            ax.plot(x, [int(d["reserved_bytes"]) / 2**30 for d in data], label=f"{allocator} (held)")
            if not live_drawn:
                ax.plot(x, [int(d["live_bytes"]) / 2**30 for d in data], "k--", label="live", linewidth=1)
                live_drawn = True
        ax.set_xlabel("event")
        ax.set_ylabel("GiB")
        ax.set_title(f"{trace} trace: device memory held (mapped/reserved) and live")
        ax.legend()
        fig.savefig(os.path.join(args.dir, f"figure-{trace}.png"), dpi=100)
        plt.close(fig)
        print(f"figure-{trace}.png")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("record")
    p.add_argument("workload", choices=["torch", "cupy"])
    p.add_argument("log")
    p = sub.add_parser("torch-caching")
    p.add_argument("--expandable", action="store_true")
    sub.add_parser("trim")
    p = sub.add_parser("replay-rmm")
    p.add_argument("log")
    p.add_argument("series")
    p.add_argument("--host", action="store_true", help="system memory under the pool (a check without a GPU)")
    p = sub.add_parser("summarize")
    p.add_argument("dir")
    args = parser.parse_args()
    command = {"record": record, "torch-caching": torch_caching, "trim": trim, "replay-rmm": replay_rmm,
               "summarize": summarize}[args.command]
    return command(args)


if __name__ == "__main__":
    sys.exit(main())
