"""A Cython extension written the way cuDF's are (tests/ext/cudf_style.pyx, built against RAPIDS
RMM 26.10's wheel only) on rmm_rs's resources: its C++ allocations through `mr.get_mr()` land in our
statistics, and its buffers free back to our pool.

The extension is built by scripts/build-beside-wheel.sh (or tests/ext/setup.py); RMM_RS_TEST_EXT_DIR
names the folder holding it. Without it these tests skip, naming the reason."""

import glob
import os
import re
import sys

import pytest

import rmm
import rmm.mr
import rmm_rs

EXT_DIR = os.environ.get("RMM_RS_TEST_EXT_DIR", "")


def _extension():
    if not EXT_DIR or not glob.glob(os.path.join(EXT_DIR, "cudf_style*.so")):
        pytest.skip("the cuDF-style test extension is not built (RMM_RS_TEST_EXT_DIR; scripts/build-beside-wheel.sh)")
    sys.path.insert(0, EXT_DIR)
    try:
        import cudf_style
    finally:
        sys.path.remove(EXT_DIR)
    return cudf_style


@pytest.fixture(scope="module")
def ext():
    return _extension()


def our_pool():
    if rmm_rs.is_host_mode():
        return rmm_rs.PoolMemoryResource(rmm_rs.SystemMemoryResource(), initial_pool_size=1 << 24)
    return rmm_rs.PoolMemoryResource(rmm_rs.CudaMemoryResource(), initial_pool_size=1 << 26)


def test_the_extension_knows_nothing_of_rmm_rs(ext):
    source = open(os.path.join(os.path.dirname(__file__), "ext", "cudf_style.pyx")).read()
    assert re.search(r"^from rmm\.pylibrmm\.memory_resource cimport DeviceMemoryResource", source, re.M)
    assert not re.search(r"^\s*(from|import|cimport)\s+rmm_rs", source, re.M)


def test_cpp_temporaries_through_get_mr_land_in_our_statistics(ext):
    stats = rmm_rs.StatisticsResourceAdaptor(our_pool())
    ns = ext.temporaries_ns_per_pair(stats, 1000)
    assert ns > 0
    counts = stats.allocation_counts
    assert counts.current_count == 0 and counts.current_bytes == 0
    assert counts.total_count == 1000 + 1000  # the warm-up pairs and the timed ones
    assert counts.peak_bytes == 2560


def test_cpp_threads_through_get_mr_on_our_pool(ext):
    stats = rmm_rs.StatisticsResourceAdaptor(our_pool())
    ext.threaded_pairs_ns_per_pair(stats, 4, 2000, not rmm_rs.is_host_mode())
    counts = stats.allocation_counts
    assert counts.current_count == 0
    assert counts.total_count == 4 * (100 + 2000)


def test_rmm_resources_serve_the_same_extension(ext):
    rmm_stats = rmm.mr.StatisticsResourceAdaptor(our_pool())
    ext.temporaries_ns_per_pair(rmm_stats, 500)
    assert rmm_stats.allocation_counts.total_count == 1500


@pytest.mark.gpu
def test_buffers_made_in_cpp_are_allocated_from_our_pool_and_freed_back(ext):
    # DeviceBuffer.c_from_unique_ptr asks RMM for the current device (a GPU).
    pool = our_pool()
    stats = rmm_rs.StatisticsResourceAdaptor(pool)
    buf = ext.make_buffer(1 << 20, mr=stats)
    assert isinstance(buf, rmm.DeviceBuffer)
    assert buf.size == 1 << 20
    assert stats.allocation_counts.current_bytes == 1 << 20
    del buf
    assert stats.allocation_counts.current_bytes == 0
    assert stats.allocation_counts.total_count == 1


@pytest.mark.gpu
def test_the_extensions_default_resource_is_rmms_current_one_set_to_ours(ext):
    stats = rmm_rs.StatisticsResourceAdaptor(our_pool())
    previous = rmm.mr.get_current_device_resource()
    rmm.mr.set_current_device_resource(stats)
    try:
        bufs = [ext.make_buffer(4096) for _ in range(8)]
        assert stats.allocation_counts.current_bytes == 8 * 4096
        del bufs
        assert stats.allocation_counts.current_bytes == 0
    finally:
        rmm.mr.set_current_device_resource(previous)
