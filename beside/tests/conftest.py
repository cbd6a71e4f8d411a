"""Shared pytest setup of the beside-RMM suite: RAPIDS RMM 26.10 (rmm-cu13) and rmm_rs in one process.
GPU tests skip with a reason in host mode (no driver or no device), never pass silently."""

import pytest

import rmm_rs

GPU_REASON = "needs a CUDA GPU"


def pytest_collection_modifyitems(config, items):
    if not rmm_rs.is_host_mode():
        return
    skip_gpu = pytest.mark.skip(reason=GPU_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
