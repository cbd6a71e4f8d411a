"""Shared pytest setup: GPU tests skip with a reason in host mode, never pass silently.

`needs_native(*names)` marks a test that needs names the native module `rmm._rmm` of this build
may not have yet (the Python half is written against the full contract): it skips, naming them.
"""

import pytest

import rmm
import rmm._native

GPU_REASON = "needs a CUDA GPU"


def pytest_collection_modifyitems(config, items):
    if not rmm.is_host_mode():
        return
    skip_gpu = pytest.mark.skip(reason=GPU_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def needs_native(*names):
    """Skip unless `rmm._rmm` exports every one of `names`."""
    missing = [name for name in names if not hasattr(rmm._rmm, name)]
    return pytest.mark.skipif(bool(missing), reason=f"rmm._rmm of this build lacks {', '.join(missing)}")


@pytest.fixture
def restore_current_resource():
    """Puts the current device resource back after the test (whatever the test set)."""
    mr = rmm.mr.get_current_device_resource()
    yield mr
    rmm.mr.set_current_device_resource(mr)
