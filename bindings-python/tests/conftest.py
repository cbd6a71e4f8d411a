"""Shared pytest setup: GPU tests skip with a reason in host mode, never pass silently."""

import pytest

import rmm

GPU_REASON = "needs a CUDA GPU"


def pytest_collection_modifyitems(config, items):
    if not rmm.is_host_mode():
        return
    skip_gpu = pytest.mark.skip(reason=GPU_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
