"""rmm._device, which reinitialize uses to make each device current in turn: the driver calls it
makes through ctypes, checked against a stand-in libcuda built here (a C compiler is needed)."""

import ctypes
import shutil
import subprocess

import pytest

from rmm import _device

FAKE_DRIVER = r"""
static __thread void *current;           /* the calling thread's current context */
static char contexts[4];                 /* device d's primary context is &contexts[d] */
static int retains[4];
int cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
int cuCtxGetCurrent(void **ctx) { *ctx = current; return 0; }
int cuCtxGetDevice(int *dev) { if (!current) return 201; *dev = (char *)current - contexts; return 0; }
int cuDeviceGet(int *dev, int ordinal) { if (ordinal < 0 || ordinal >= 4) return 101; *dev = ordinal; return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { retains[dev]++; *ctx = &contexts[dev]; return 0; }
int cuCtxSetCurrent(void *ctx) { current = ctx; return 0; }
int fake_retains(int dev) { return retains[dev]; }
"""


@pytest.fixture
def fake_driver(tmp_path, monkeypatch):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("needs a C compiler for the stand-in libcuda")
    source = tmp_path / "fake_cuda.c"
    source.write_text(FAKE_DRIVER)
    library = tmp_path / "libfakecuda.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    lib = ctypes.CDLL(str(library))
    monkeypatch.setattr(_device, "_driver", lambda: lib)
    monkeypatch.setattr(_device, "_primary", {})
    return lib


def test_no_current_context_is_device_zero(fake_driver):
    assert _device.get_device() == 0


def test_set_then_get(fake_driver):
    _device.set_device(2)
    assert _device.get_device() == 2
    _device.set_device(0)
    assert _device.get_device() == 0


def test_each_primary_context_is_retained_once(fake_driver):
    for device in (1, 3, 1, 3, 1):
        _device.set_device(device)
    assert [fake_driver.fake_retains(d) for d in range(4)] == [0, 1, 0, 1]


def test_a_device_that_does_not_exist_raises_with_the_driver_status(fake_driver):
    with pytest.raises(RuntimeError, match="cuDeviceGet failed: CUresult 101"):
        _device.set_device(4)
