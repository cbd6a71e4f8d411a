"""rmm.reinitialize and its hooks (pure Python over the native resources and registry)."""

import pytest

import rmm
import rmm.mr

# What reinitialize builds on: CUDA memory, or host memory in host mode (an rmm-rs extension).
BASE = rmm.mr.SystemMemoryResource if rmm.is_host_mode() else rmm.mr.CudaMemoryResource


@pytest.fixture(autouse=True)
def reinitialize_after():
    yield
    rmm.reinitialize()


@pytest.fixture
def hooks():
    registered = []

    def register(func, *args, **kwargs):
        registered.append(func)
        return rmm.register_reinitialize_hook(func, *args, **kwargs)

    yield register
    for func in registered:
        rmm.unregister_reinitialize_hook(func)


def test_default_is_the_plain_base_resource():
    rmm.reinitialize()
    assert type(rmm.mr.get_current_device_resource()) is BASE


def test_the_new_resource_is_what_every_getter_returns():
    rmm.reinitialize(pool_allocator=True, initial_pool_size=1 << 20)
    mr = rmm.mr.get_current_device_resource()
    assert isinstance(mr, rmm.mr.PoolMemoryResource)
    assert rmm.mr.get_per_device_resource(0) is mr
    assert type(mr.get_upstream()) is BASE
    assert mr.pool_size() >= 1 << 20


@pytest.mark.parametrize(
    "initial, maximum",
    [("2kib", "8kib"), ("2 KiB", "8.192KB"), (2048, "1.5 mib"), ("2048", None), ("256b", "1\tMiB"), ("512.", "1.024 MB")],
)
def test_pool_sizes_as_int_or_string(initial, maximum):
    rmm.reinitialize(pool_allocator=True, initial_pool_size=initial, maximum_pool_size=maximum)
    mr = rmm.mr.get_current_device_resource()
    assert isinstance(mr, rmm.mr.PoolMemoryResource)
    ptr = mr.allocate(1024)
    mr.deallocate(ptr, 1024)


@pytest.mark.parametrize("bad", ["2k", "MiB", "1 0 MiB", "1e3kb", "-1kb", "", "1 GiBs"])
def test_a_size_that_is_not_a_byte_specification_is_a_value_error(bad):
    with pytest.raises(ValueError, match="Could not parse"):
        rmm.reinitialize(pool_allocator=True, initial_pool_size=bad)


def test_initial_larger_than_maximum_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="Initial pool size exceeds the maximum pool size"):
        rmm.reinitialize(pool_allocator=True, initial_pool_size=1 << 11, maximum_pool_size=1 << 10)


def test_sizes_are_ignored_without_a_pool():
    rmm.reinitialize(initial_pool_size="not a size", maximum_pool_size=[])
    assert type(rmm.mr.get_current_device_resource()) is BASE


@pytest.mark.parametrize("devices", [0, [0], None])
def test_devices_as_int_list_or_none(devices):
    rmm.reinitialize(pool_allocator=True, initial_pool_size="1MiB", devices=devices)
    assert isinstance(rmm.mr.get_per_device_resource(0), rmm.mr.PoolMemoryResource)


@pytest.mark.parametrize("bad", ["count", -1])
def test_a_device_that_does_not_exist_is_rmms_runtime_error_and_changes_nothing(bad):
    rmm.reinitialize(pool_allocator=True, initial_pool_size="1MiB")
    before = rmm.mr.get_current_device_resource()
    count = 1 if rmm.is_host_mode() else rmm._rmm.get_device_count()
    with pytest.raises(RuntimeError, match="cudaErrorInvalidDevice: invalid device ordinal.*does not exist"):
        rmm.reinitialize(devices=[0, count if bad == "count" else bad])
    assert rmm.mr.get_current_device_resource() is before


@pytest.mark.gpu
def test_several_devices_each_get_their_own_resource_and_the_device_is_restored():
    from rmm import _device

    count = rmm._rmm.get_device_count()
    if count < 2:
        pytest.skip("needs 2 GPUs")
    _device.set_device(1)
    try:
        rmm.reinitialize(pool_allocator=True, initial_pool_size="1MiB", devices=[0, 1])
        assert _device.get_device() == 1
        pools = [rmm.mr.get_per_device_resource(d) for d in (0, 1)]
        assert all(isinstance(p, rmm.mr.PoolMemoryResource) for p in pools)
        assert pools[0] is not pools[1]
        # A later reinitialize of device 0 alone gives device 1 a plain resource back (RMM forgets it).
        rmm.reinitialize(devices=0)
        assert type(rmm.mr.get_per_device_resource(1)) is rmm.mr.CudaMemoryResource
    finally:
        _device.set_device(0)


@pytest.mark.gpu
def test_managed_memory():
    rmm.reinitialize(managed_memory=True)
    assert type(rmm.mr.get_current_device_resource()) is rmm.mr.ManagedMemoryResource
    rmm.reinitialize(pool_allocator=True, managed_memory=True, initial_pool_size="1MiB")
    assert type(rmm.mr.get_current_device_resource().get_upstream()) is rmm.mr.ManagedMemoryResource


def test_managed_memory_in_host_mode_is_host_memory():
    if not rmm.is_host_mode():
        pytest.skip("host mode only")
    rmm.reinitialize(managed_memory=True)
    assert type(rmm.mr.get_current_device_resource()) is rmm.mr.SystemMemoryResource


def test_is_initialized_after_reinitialize():
    rmm.reinitialize()
    assert rmm.is_initialized() is True


def test_hooks_run_last_registered_first_with_their_arguments(hooks):
    calls = []
    hooks(lambda: calls.append(1))
    hooks(lambda: calls.append(2))
    hooks(lambda x, y=0: calls.append(x + y), 3, y=10)
    rmm.reinitialize()
    assert calls == [13, 2, 1]


def test_hooks_run_before_the_new_resource_is_set(hooks):
    seen = []
    hooks(lambda: seen.append(rmm.mr.get_current_device_resource()))
    rmm.reinitialize(pool_allocator=True, initial_pool_size="1MiB")
    before = rmm.mr.get_current_device_resource()
    rmm.reinitialize()
    assert seen[-1] is before


def test_unregister_removes_every_registration(hooks):
    calls = []

    def twice(x):
        calls.append(x)

    hooks(twice, 1)
    hooks(lambda: calls.append(2))
    hooks(twice, 3)
    rmm.unregister_reinitialize_hook(twice)
    rmm.reinitialize()
    assert calls == [2]


def test_register_returns_the_function_and_unregistering_an_unknown_one_is_fine(hooks):
    def hook():
        pass

    assert hooks(hook) is hook
    rmm.unregister_reinitialize_hook(lambda: None)


def test_a_failing_hook_stops_reinitialize(hooks):
    rmm.reinitialize(pool_allocator=True, initial_pool_size="1MiB")
    before = rmm.mr.get_current_device_resource()

    def boom():
        raise KeyError("hook")

    hooks(boom)
    with pytest.raises(KeyError):
        rmm.reinitialize()
    assert rmm.mr.get_current_device_resource() is before
    rmm.unregister_reinitialize_hook(boom)
