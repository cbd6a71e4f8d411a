"""rmm.enable_logging / disable_logging / get_log_filenames and reinitialize(logging=True): one CSV
log per device, named with `.dev<N>` (pure Python over the native LoggingResourceAdaptor)."""

import os

import pytest

import rmm
import rmm.mr
from rmm.pylibrmm.memory_resource._memory_resource import _append_id

@pytest.fixture(autouse=True)
def fresh_resource():
    rmm.reinitialize()
    yield
    rmm.reinitialize()


def allocate_and_free(nbytes=1000):
    mr = rmm.mr.get_current_device_resource()
    mr.deallocate(mr.allocate(nbytes), nbytes)


@pytest.mark.parametrize(
    "name, expected",
    [("hello.txt", "hello.dev3.txt"), ("/a/b.c/log", "/a/b.c/log.dev3"), ("rmm.log.csv", "rmm.log.dev3.csv")],
)
def test_append_id(name, expected):
    assert _append_id(name, 3) == expected


def test_no_logging_means_none_for_every_device_in_use():
    assert rmm.get_log_filenames() == {0: None}
    rmm.disable_logging()  # nothing to disable
    assert rmm.get_log_filenames() == {0: None}


def test_reinitialize_with_logging_writes_a_csv_per_device(tmp_path):
    base = str(tmp_path / "rmm_log.csv")
    rmm.reinitialize(logging=True, log_file_name=base)
    mr = rmm.mr.get_current_device_resource()
    assert isinstance(mr, rmm.mr.LoggingResourceAdaptor)
    expected = str(tmp_path / "rmm_log.dev0.csv")
    assert rmm.get_log_filenames() == {0: expected}
    allocate_and_free()
    from rmm.pylibrmm.memory_resource._memory_resource import _flush_logs

    _flush_logs()
    text = open(expected).read()
    assert "Time,Action,Pointer,Size,Stream" in text
    assert "allocate" in text and "free" in text


def test_reinitialize_with_logging_and_a_pool(tmp_path):
    rmm.reinitialize(pool_allocator=True, initial_pool_size="1MiB", logging=True, log_file_name=str(tmp_path / "p.log"))
    mr = rmm.mr.get_current_device_resource()
    assert isinstance(mr, rmm.mr.LoggingResourceAdaptor)
    assert isinstance(mr.get_upstream(), rmm.mr.PoolMemoryResource)
    assert rmm.get_log_filenames() == {0: str(tmp_path / "p.dev0.log")}


def test_enable_then_disable_logging(tmp_path):
    base = rmm.mr.get_current_device_resource()
    rmm.enable_logging(log_file_name=str(tmp_path / "e.csv"))
    logging_mr = rmm.mr.get_per_device_resource(0)
    assert isinstance(logging_mr, rmm.mr.LoggingResourceAdaptor)
    assert logging_mr.get_upstream() is base
    rmm.enable_logging(log_file_name=str(tmp_path / "other.csv"))  # already logging: unchanged
    assert rmm.mr.get_per_device_resource(0) is logging_mr
    allocate_and_free()
    logging_mr.flush()
    assert os.path.getsize(tmp_path / "e.dev0.csv") > 0
    rmm.disable_logging()
    assert rmm.mr.get_per_device_resource(0) is base
    assert rmm.get_log_filenames() == {0: None}


def test_log_file_from_rmm_log_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RMM_LOG_FILE", str(tmp_path / "env.txt"))
    rmm.enable_logging()
    assert rmm.get_log_filenames() == {0: str(tmp_path / "env.dev0.txt")}


def test_no_file_name_and_no_rmm_log_file_is_a_value_error(monkeypatch):
    monkeypatch.delenv("RMM_LOG_FILE", raising=False)
    with pytest.raises(ValueError):
        rmm.enable_logging()
    with pytest.raises(ValueError):
        rmm.reinitialize(logging=True)


def test_a_logging_adaptor_set_by_hand_is_seen(tmp_path):
    mr = rmm.mr.LoggingResourceAdaptor(rmm.mr.get_current_device_resource(), str(tmp_path / "hand.csv"))
    rmm.mr.set_per_device_resource(0, mr)
    assert rmm.get_log_filenames() == {0: str(tmp_path / "hand.dev0.csv")}
    rmm.disable_logging()
    assert rmm.mr.get_per_device_resource(0) is mr.get_upstream()
