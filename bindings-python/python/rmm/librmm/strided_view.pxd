# The C struct of rmm.StridedMemoryView (rmm_strided_view in rmm_c.h), for Cython code:
#
#     from libc.stdint cimport uintptr_t
#     from rmm.librmm.strided_view cimport rmm_strided_view
#
#     def first_extent(view):            # view: rmm.StridedMemoryView
#         cdef const rmm_strided_view* v = <const rmm_strided_view*><uintptr_t>view.c_view_address
#         if v.generation == 0:          # released
#             raise ValueError("released view")
#         return v.shape[0] if v.ndim else None
#
# The struct lives in the Python object: valid while the object does; its pointers (shape, strides,
# byte_strides, format) are valid until view.release(), after which `generation` is 0 and every
# pointer NULL. Layout: bindings-cpp/include/rmm_rs/rmm_c.h (checked by core's tests).

from libc.stdint cimport int64_t, uint8_t, uint16_t, uint64_t, uintptr_t



cdef extern from *:
    """
    #include <stdbool.h>
    #include <stdint.h>
    #ifndef RMM_STRIDED_VIEW_PXD_DEFINED
    #define RMM_STRIDED_VIEW_PXD_DEFINED
    #ifndef RMM_RMM_C_H
    typedef struct rmm_dl_data_type { uint8_t code; uint8_t bits; uint16_t lanes; } rmm_dl_data_type;
    typedef struct rmm_strided_view {
      uintptr_t ptr; int ndim; const int64_t* shape; const int64_t* strides; const int64_t* byte_strides;
      int64_t itemsize; rmm_dl_data_type dtype; const char* format; int device_type; int device_id;
      bool device_accessible; bool readonly; const void* owner;
      const struct rmm_strided_view* device_copy; uint64_t generation;
    } rmm_strided_view;
    #endif
    #endif
    """
    ctypedef struct rmm_dl_data_type:
        uint8_t code
        uint8_t bits
        uint16_t lanes

    ctypedef struct rmm_strided_view:
        uintptr_t ptr
        int ndim
        const int64_t* shape
        const int64_t* strides
        const int64_t* byte_strides
        int64_t itemsize
        rmm_dl_data_type dtype
        const char* format
        int device_type
        int device_id
        bint device_accessible
        bint readonly
        const void* owner
        const rmm_strided_view* device_copy
        uint64_t generation
