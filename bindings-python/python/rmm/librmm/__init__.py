"""RMM's ``rmm.librmm`` (in RMM, Cython declarations of the C++ library). rmm-rs's C++ library is
``librmm_rs.so`` (its C ABI is ``rmm_c.h``); from Python only ``rmm.librmm._logger`` is offered."""
