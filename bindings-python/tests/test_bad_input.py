"""Bad input from Python (issue 12's bad-input matrix): frees that do not match a live allocation
are a ValueError and leave the resource intact; size strings follow RMM's grammar (a fraction of a
byte truncates as in RMM, a unit alone is a ValueError). Host mode or GPU alike."""

import pytest

import rmm
import rmm.mr

MIB = 1 << 20


@pytest.fixture(autouse=True)
def fresh_resource():
    rmm.reinitialize()
    yield
    rmm.reinitialize()


def pool(upstream):
    return rmm.mr.PoolMemoryResource(upstream, initial_pool_size=MIB)


def arena(upstream):
    return rmm.mr.ArenaMemoryResource(upstream, 4 * MIB)


def binning(upstream):
    return rmm.mr.BinningMemoryResource(upstream, 8, 14)


def fixed_size(upstream):
    return rmm.mr.FixedSizeMemoryResource(upstream, 4096, 16)


@pytest.mark.parametrize("make", [pool, arena, binning, fixed_size])
def test_wrong_frees_are_value_errors_and_change_nothing(make):
    mr = make(rmm.mr.get_current_device_resource())
    p = mr.allocate(4096)
    for ptr, nbytes in [(p + 256, 256), (p, 256), (p, 8192), (p + 4096, 4096)]:
        with pytest.raises(ValueError):
            mr.deallocate(ptr, nbytes)
    # Nothing was freed: later allocations never land inside the live block.
    others = [mr.allocate(256) for _ in range(32)]
    assert all(not (p <= q < p + 4096) for q in others)
    mr.deallocate(p, 4096)
    with pytest.raises(ValueError):
        mr.deallocate(p, 4096)
    for q in others:
        mr.deallocate(q, 256)
    # Still usable.
    mr.deallocate(mr.allocate(4096), 4096)


def test_a_fraction_of_a_byte_truncates_as_in_rmm():
    upstream = rmm.mr.get_current_device_resource()
    assert rmm.mr.PoolMemoryResource(upstream, initial_pool_size="1024.9").pool_size() == 1024
    assert rmm.mr.PoolMemoryResource(upstream, initial_pool_size="1.5 KiB").pool_size() == 1536


@pytest.mark.parametrize("bad", ["kib", "KiB", "b", "1.5.0", "256,9"])
def test_a_unit_alone_or_a_malformed_number_is_a_value_error(bad):
    with pytest.raises(ValueError, match="Could not parse"):
        rmm.mr.PoolMemoryResource(rmm.mr.get_current_device_resource(), initial_pool_size=bad)
