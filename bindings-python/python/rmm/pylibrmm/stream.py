"""CUDA streams (RMM's ``rmm.pylibrmm.stream``).

:class:`Stream` wraps a new stream (``Stream()``), another :class:`Stream`, any object with
``__cuda_stream__``, or a CuPy or Numba stream. The three default streams are module constants.
"""

from rmm._rmm import (
    Stream,
    CudaStreamFlags,
    DEFAULT_STREAM,
    LEGACY_DEFAULT_STREAM,
    PER_THREAD_DEFAULT_STREAM,
    _OwningStream,
)

__all__ = ["DEFAULT_STREAM", "LEGACY_DEFAULT_STREAM", "PER_THREAD_DEFAULT_STREAM", "CudaStreamFlags", "Stream"]
