"""rmm.timeline: the process's memory timeline, in PyTorch's snapshot format (host mode; the GPU
acceptance with PyTorch, CuPy, C++ and Rust together is scripts/gpu-timeline.sh)."""

import json
import pickle

import pytest

import rmm
import rmm.timeline

try:
    from torch.cuda import _memory_viz
except ImportError:
    _memory_viz = None

NEEDS_TORCH = "needs torch (torch.cuda._memory_viz reads the snapshot); plain pickle checks run instead"


@pytest.fixture
def recorder():
    """A fresh recorder, stopped and cleared afterwards, with the current resource put back."""
    before = rmm.mr.get_current_device_resource()
    rmm.timeline.start(clear=True)
    yield
    if rmm.timeline.is_recording():
        rmm.timeline.stop()
    rmm.timeline.clear()
    rmm.mr.set_current_device_resource(before)


def entries_at(snap, addr):
    return [e for trace in snap["device_traces"] for e in trace if e["addr"] == addr]


def segment_holding(snap, addr):
    for seg in snap["segments"]:
        if seg["address"] <= addr < seg["address"] + seg["total_size"]:
            return seg
    raise AssertionError(f"no segment holds {addr:#x}")


def check_segsum_invariants(snap):
    """What torch.cuda._memory_viz.segsum asserts, and the keys its readers use."""
    for seg in snap["segments"]:
        for key in ("device", "address", "total_size", "allocated_size", "active_size", "stream", "segment_type"):
            assert key in seg, key
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        at = seg["address"]
        for b in seg["blocks"]:
            assert b["address"] == at
            assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
            assert b["requested_size"] <= b["size"]
            for f in b["frames"]:
                assert set(f) == {"filename", "line", "name"}
            at += b["size"]
    for trace in snap["device_traces"]:
        for e in trace:
            for key in ("action", "addr", "size", "stream", "time_us", "frames"):
                assert key in e, key


def allocate_here():
    return rmm.DeviceBuffer(size=12345)


def test_start_wraps_the_current_resource_and_stop_puts_it_back(recorder):
    mr = rmm.mr.get_current_device_resource()
    assert isinstance(mr, rmm.mr.RecordingResourceAdaptor)
    assert rmm.timeline.is_recording()
    rmm.timeline.stop()
    assert not rmm.timeline.is_recording()
    assert not isinstance(rmm.mr.get_current_device_resource(), rmm.mr.RecordingResourceAdaptor)
    assert mr.upstream_mr is rmm.mr.get_current_device_resource()


def test_a_device_buffer_is_a_block_with_the_python_frames_that_made_it(recorder):
    buf = allocate_here()
    snap = rmm.timeline.snapshot()
    seg = segment_holding(snap, buf.ptr)
    block = next(b for b in seg["blocks"] if b["address"] == buf.ptr)
    assert block["state"] == "active_allocated"
    assert block["requested_size"] == 12345
    names = [f["name"] for f in block["frames"]]
    assert names[:2] == ["allocate_here", "test_a_device_buffer_is_a_block_with_the_python_frames_that_made_it"], names
    assert block["frames"][0]["filename"].endswith("test_timeline.py")
    assert block["resource"].startswith("recording_resource_adaptor > ")
    (alloc,) = entries_at(snap, buf.ptr)
    assert alloc["action"] == "alloc" and alloc["size"] == 12345
    assert alloc["frames"] == block["frames"]
    check_segsum_invariants(snap)


def test_frees_are_requested_and_completed_and_keep_the_allocations_frames(recorder):
    mr = rmm.mr.get_current_device_resource()
    ptr = mr.allocate(4096)
    mr.deallocate(ptr, 4096)
    snap = rmm.timeline.snapshot()
    actions = [e["action"] for e in entries_at(snap, ptr)]
    assert actions == ["alloc", "free_requested", "free_completed"]
    assert entries_at(snap, ptr)[0]["frames"][0]["name"] == (
        "test_frees_are_requested_and_completed_and_keep_the_allocations_frames"
    )
    assert all(seg["address"] != ptr for seg in snap["segments"])


def test_pool_segments_hold_the_pools_blocks_and_out_of_memory_dumps_a_snapshot(tmp_path):
    before = rmm.mr.get_current_device_resource()
    # Device memory on a GPU (a system-memory pool cannot be the device resource without pageable
    # memory access); host memory in host mode, where CudaMemoryResource needs a driver.
    upstream = rmm.mr.SystemMemoryResource() if rmm.is_host_mode() else rmm.mr.CudaMemoryResource()
    pool = rmm.mr.PoolMemoryResource(upstream, 1 << 20, 1 << 20)
    rmm.mr.set_current_device_resource(pool)
    dump = tmp_path / "oom.pickle"
    try:
        rmm.timeline.start(clear=True, dump_on_oom=dump)
        held = [rmm.DeviceBuffer(size=256 << 10) for _ in range(4)]
        del held[1], held[2]  # two free holes of 256 KiB: 512 KiB free, none of it in one piece
        with pytest.raises(MemoryError, match="fragmentation"):
            rmm.DeviceBuffer(size=400 << 10)
        snap = rmm.timeline.snapshot()
    finally:
        rmm.timeline.stop()
        rmm.timeline.clear()
        rmm.mr.set_current_device_resource(before)
    seg = segment_holding(snap, held[0].ptr)
    assert seg["total_size"] == 1 << 20
    assert seg["resource"] == "pool_memory_resource"
    states = [b["state"] for b in seg["blocks"]]
    assert states.count("active_allocated") == 2
    check_segsum_invariants(snap)
    (oom,) = [e for e in snap["device_traces"][0] if e["action"] == "oom"]
    assert oom["size"] == 400 << 10
    assert "largest free block" in oom["message"]
    assert oom["frames"][0]["name"] == "test_pool_segments_hold_the_pools_blocks_and_out_of_memory_dumps_a_snapshot"
    dumped = rmm.timeline.load_snapshot(dump)
    assert any(e["action"] == "oom" for e in dumped["device_traces"][0])


def test_dump_and_load_in_every_format(recorder, tmp_path):
    buf = rmm.DeviceBuffer(size=1000)
    for name in ("s.pickle", "s.pkl", "s.json"):
        rmm.timeline.dump_snapshot(tmp_path / name)
        loaded = rmm.timeline.load_snapshot(tmp_path / name)
        assert segment_holding(loaded, buf.ptr)["total_size"] == 1000
        check_segsum_invariants(loaded)
    with open(tmp_path / "s.pickle", "rb") as f:
        assert segment_holding(pickle.load(f), buf.ptr)  # plain pickle reads our file
    with open(tmp_path / "s.json") as f:
        assert segment_holding(json.load(f), buf.ptr)
    rmm.timeline.dump_snapshot(tmp_path / "log.csv")
    lines = (tmp_path / "log.csv").read_text().splitlines()
    assert lines[0] == "Thread,Time,Action,Pointer,Size,Stream"
    assert any(line.endswith(f",allocate,{buf.ptr:#x},1000,0x0") for line in lines)
    with pytest.raises(ValueError, match="unknown snapshot format"):
        rmm.timeline.dump_snapshot(tmp_path / "s.txt")


def test_corrupt_and_truncated_files_are_clear_value_errors(recorder, tmp_path):
    rmm.DeviceBuffer(size=100)
    good = tmp_path / "s.pickle"
    rmm.timeline.dump_snapshot(good)
    data = good.read_bytes()
    cut = tmp_path / "cut.pickle"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.pickle: .*truncated file"):
        rmm.timeline.load_snapshot(cut)
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps(print))  # names a global: refused, never loaded
    with pytest.raises(ValueError, match="not allowed"):
        rmm.timeline.load_snapshot(evil)
    shape = tmp_path / "shape.json"
    shape.write_text('{"segments": [{"address": 0, "total_size": -1, "blocks": []}]}')
    with pytest.raises(ValueError, match=r"segments\[0\]\.total_size: -1 is negative"):
        rmm.timeline.load_snapshot(shape)
    with pytest.raises(ValueError, match="max_entries"):
        rmm.timeline.start(0)


def test_the_ring_is_bounded_and_counts_what_it_dropped(recorder):
    rmm.timeline.start(4, clear=True)
    bufs = [rmm.DeviceBuffer(size=64) for _ in range(10)]
    snap = rmm.timeline.snapshot()
    assert len(snap["device_traces"][0]) == 4
    assert snap["rmm"]["dropped_events"] >= 6
    for b in bufs:  # the live set is not bounded by the ring
        segment_holding(snap, b.ptr)


def test_the_recording_context_manager(tmp_path):
    with rmm.timeline.recording(clear=True):
        assert rmm.timeline.is_recording()
        buf = rmm.DeviceBuffer(size=77)
    assert not rmm.timeline.is_recording()
    assert segment_holding(rmm.timeline.snapshot(), buf.ptr)
    rmm.timeline.clear()


def test_a_recording_adaptor_made_by_hand_records_only_while_the_timeline_records():
    mr = rmm.mr.RecordingResourceAdaptor(rmm.mr.SystemMemoryResource())
    rmm.timeline.clear()
    ptr = mr.allocate(512)
    assert entries_at(rmm.timeline.snapshot(), ptr) == []
    with rmm.timeline.recording():
        mr.deallocate(ptr, 512)
        ptr = mr.allocate(512)
    snap = rmm.timeline.snapshot()
    assert [e["action"] for e in entries_at(snap, ptr)][-1] == "alloc"
    mr.deallocate(ptr, 512)
    rmm.timeline.clear()


@pytest.mark.skipif(_memory_viz is None, reason=NEEDS_TORCH)
def test_torch_memory_viz_reads_our_snapshot(recorder):
    bufs = [rmm.DeviceBuffer(size=n) for n in (100, 5000, 70000)]
    del bufs[1]
    snap = rmm.timeline.snapshot()
    summary = _memory_viz.segsum(snap)
    assert f"segments: {len(snap['segments'])}" in summary
    text = _memory_viz.trace(snap)
    assert "entries" in text
    html = _memory_viz.trace_plot(snap)
    assert "snapshot.pickle" in html


def test_an_allocation_that_released_the_gil_gets_its_python_frames(recorder):
    """PyTorch's operators release the GIL and then allocate through rmm_torch_allocate; ctypes.CDLL
    calls release it too: the provider takes the GIL back for the frames."""
    import ctypes

    lib = ctypes.CDLL(rmm._rmm._librmm_path())
    lib.rmm_torch_allocate.restype = ctypes.c_void_p
    lib.rmm_torch_allocate.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    lib.rmm_torch_deallocate.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    ptr = lib.rmm_torch_allocate(5555, 0, None)
    snap = rmm.timeline.snapshot()
    lib.rmm_torch_deallocate(ptr, 5555, 0, None)
    (alloc,) = entries_at(snap, ptr)
    assert alloc["frames"][0]["name"] == "test_an_allocation_that_released_the_gil_gets_its_python_frames"
