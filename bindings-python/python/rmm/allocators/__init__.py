"""Allocators that route CuPy, Numba and PyTorch allocations through RMM (RMM's
``rmm.allocators``): ``rmm.allocators.cupy``, ``rmm.allocators.numba``, ``rmm.allocators.torch``."""
