"""A pool of CUDA streams handed out round robin (RMM's ``rmm.pylibrmm.cuda_stream_pool``)."""

from rmm._rmm import (
    CudaStreamPool,
)

__all__ = ["CudaStreamPool"]
