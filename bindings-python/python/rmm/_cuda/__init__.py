"""CUDA helpers built on cuda-python (RMM's private ``rmm._cuda`` package)."""
