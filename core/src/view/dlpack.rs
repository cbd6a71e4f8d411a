//! The C types of DLPack 1.1 (`dlpack.h`), `#[repr(C)]` with the header's layout, and the two
//! managed-tensor forms: [`DLManagedTensorVersioned`] (DLPack ≥ 1.0, capsule name
//! `"dltensor_versioned"`) and the legacy unversioned [`DLManagedTensor`] (capsule `"dltensor"`).
//!
//! Defined here from the header (they are small) instead of through a crate: the layout is the
//! ABI, and these are checked field by field against `dlpack.h`'s offsets in the tests below.

use std::ffi::c_void;

/// The DLPack version this crate implements: `DLPACK_MAJOR_VERSION`.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// `DLPACK_MINOR_VERSION`.
pub const DLPACK_MINOR_VERSION: u32 = 1;

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write through the tensor.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer copied the data for this export.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`: sub-byte items are padded to one byte each.
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Incompatible changes bump it.
    pub major: u32,
    /// Compatible additions bump it.
    pub minor: u32,
}

/// `DLDeviceType` values (`int32_t` enum in C).
pub mod device_type {
    /// Host memory.
    pub const CPU: i32 = 1;
    /// CUDA device memory.
    pub const CUDA: i32 = 2;
    /// Pinned host memory (`cudaMallocHost`).
    pub const CUDA_HOST: i32 = 3;
    /// OpenCL.
    pub const OPENCL: i32 = 4;
    /// Vulkan.
    pub const VULKAN: i32 = 7;
    /// Metal.
    pub const METAL: i32 = 8;
    /// Verilog simulator.
    pub const VPI: i32 = 9;
    /// ROCm GPUs.
    pub const ROCM: i32 = 10;
    /// Pinned ROCm host memory.
    pub const ROCM_HOST: i32 = 11;
    /// Reserved for extensions.
    pub const EXT_DEV: i32 = 12;
    /// CUDA managed (unified) memory.
    pub const CUDA_MANAGED: i32 = 13;
    /// oneAPI unified shared memory.
    pub const ONE_API: i32 = 14;
    /// WebGPU.
    pub const WEB_GPU: i32 = 15;
    /// Qualcomm Hexagon DSP.
    pub const HEXAGON: i32 = 16;
    /// Microsoft MAIA.
    pub const MAIA: i32 = 17;

    /// True when memory of this device type is readable by CUDA kernels.
    pub fn is_cuda_accessible(t: i32) -> bool {
        matches!(t, CUDA | CUDA_HOST | CUDA_MANAGED)
    }

    /// True when memory of this device type is readable by the host CPU.
    pub fn is_host_accessible(t: i32) -> bool {
        matches!(t, CPU | CUDA_HOST | CUDA_MANAGED | ROCM_HOST)
    }
}

/// `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// A [`device_type`] value.
    pub device_type: i32,
    /// The device ordinal (0 for the host).
    pub device_id: i32,
}

/// `DLDataTypeCode` values (`uint8_t` in `DLDataType`).
pub mod type_code {
    /// Signed integer.
    pub const INT: u8 = 0;
    /// Unsigned integer.
    pub const UINT: u8 = 1;
    /// IEEE floating point.
    pub const FLOAT: u8 = 2;
    /// Opaque handle (bytes of no interpreted type).
    pub const OPAQUE_HANDLE: u8 = 3;
    /// bfloat16.
    pub const BFLOAT: u8 = 4;
    /// Complex (two floats).
    pub const COMPLEX: u8 = 5;
    /// Boolean.
    pub const BOOL: u8 = 6;
    /// float8 e3m4.
    pub const FLOAT8_E3M4: u8 = 7;
    /// float8 e4m3.
    pub const FLOAT8_E4M3: u8 = 8;
    /// float8 e4m3b11fnuz.
    pub const FLOAT8_E4M3B11FNUZ: u8 = 9;
    /// float8 e4m3fn.
    pub const FLOAT8_E4M3FN: u8 = 10;
    /// float8 e4m3fnuz.
    pub const FLOAT8_E4M3FNUZ: u8 = 11;
    /// float8 e5m2.
    pub const FLOAT8_E5M2: u8 = 12;
    /// float8 e5m2fnuz.
    pub const FLOAT8_E5M2FNUZ: u8 = 13;
    /// float8 e8m0fnu.
    pub const FLOAT8_E8M0FNU: u8 = 14;
    /// float6 e2m3fn (sub-byte).
    pub const FLOAT6_E2M3FN: u8 = 15;
    /// float6 e3m2fn (sub-byte).
    pub const FLOAT6_E3M2FN: u8 = 16;
    /// float4 e2m1fn (sub-byte).
    pub const FLOAT4_E2M1FN: u8 = 17;
}

/// `DLDataType`: type code, bits per lane, lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DLDataType {
    /// A [`type_code`] value.
    pub code: u8,
    /// Bits of one lane.
    pub bits: u8,
    /// Lanes per item (1 for scalars).
    pub lanes: u16,
}

impl DLDataType {
    /// A scalar type (one lane).
    pub const fn new(code: u8, bits: u8) -> Self {
        DLDataType {
            code,
            bits,
            lanes: 1,
        }
    }
}

/// `DLTensor`: the plain, non-owning description of an array.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    /// The base address (add `byte_offset` for the first element).
    pub data: *mut c_void,
    /// Where the memory is.
    pub device: DLDevice,
    /// Number of dimensions (0 for a scalar).
    pub ndim: i32,
    /// The item type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in items, or NULL for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensor` (legacy, unversioned; capsule name `"dltensor"`).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when done; may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned` (DLPack ≥ 1.0; capsule name `"dltensor_versioned"`).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version the producer implements.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Called once by the consumer when done; may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_dlpack_h_on_64_bit_targets() {
        assert_eq!(size_of::<DLDataType>(), 4);
        assert_eq!(size_of::<DLDevice>(), 8);
        assert_eq!(offset_of!(DLTensor, device), 8);
        assert_eq!(offset_of!(DLTensor, ndim), 16);
        assert_eq!(offset_of!(DLTensor, dtype), 20);
        assert_eq!(offset_of!(DLTensor, shape), 24);
        assert_eq!(offset_of!(DLTensor, strides), 32);
        assert_eq!(offset_of!(DLTensor, byte_offset), 40);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(offset_of!(DLManagedTensor, manager_ctx), 48);
        assert_eq!(size_of::<DLManagedTensor>(), 64);
        assert_eq!(offset_of!(DLManagedTensorVersioned, manager_ctx), 8);
        assert_eq!(offset_of!(DLManagedTensorVersioned, deleter), 16);
        assert_eq!(offset_of!(DLManagedTensorVersioned, flags), 24);
        assert_eq!(offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
    }
}
