//! CUDA memory pools (`cudaMemPool_t` / `CUmemoryPool`): creation, the default managed pool,
//! attributes, and stream-ordered allocation from a pool, shared by `cuda_async_memory_resource`,
//! `cuda_async_view_memory_resource` and `cuda_async_managed_memory_resource` (RMM's resources all
//! delegate to the view for this).

use super::device::{self, ensure_context, DeviceId};
use super::{check, check_alloc, cuda_error, sys, Stream};
use crate::aligned::check_base_alignment;
use crate::error::{Error, Result};

/// A pool handle as an integer (`cudaMemPool_t` / `CUmemoryPool`).
pub(crate) type PoolHandle = usize;

fn as_pool(handle: PoolHandle) -> sys::CUmemoryPool {
    handle as sys::CUmemoryPool
}

/// The 64-bit pool attributes rmm reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolAttribute {
    /// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`: bytes the pool holds from the device.
    ReservedMemCurrent,
    /// `CU_MEMPOOL_ATTR_USED_MEM_CURRENT`: bytes handed out.
    UsedMemCurrent,
    /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`: bytes the pool keeps at a synchronization.
    ReleaseThreshold,
}

impl PoolAttribute {
    fn raw(self) -> sys::CUmemPool_attribute {
        match self {
            PoolAttribute::ReservedMemCurrent => {
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
            }
            PoolAttribute::UsedMemCurrent => {
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT
            }
            PoolAttribute::ReleaseThreshold => {
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
            }
        }
    }
}

/// `Unsupported` unless `device` supports stream-ordered memory pools (`cudaMallocAsync`).
pub(crate) fn require_pools(device: DeviceId) -> Result<()> {
    let supported = device::attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
    )?;
    if supported == 0 {
        return Err(Error::Unsupported(format!(
            "cudaMallocAsync (memory pools) is not supported on device {device} with this driver"
        )));
    }
    Ok(())
}

/// The IPC handle types (`CUmemAllocationHandleType` bits) pools of `device` can export; 0 when the
/// driver cannot answer (RMM treats the error the same way).
pub(crate) fn supported_handle_types(device: DeviceId) -> u32 {
    device::attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
    )
    .unwrap_or(0) as u32
}

/// Why [`create`] failed.
#[derive(Debug)]
pub(crate) enum CreateError {
    /// The driver refused the export handle types (`CUDA_ERROR_NOT_SUPPORTED` or
    /// `CUDA_ERROR_NOT_PERMITTED` with handle types requested), as this error.
    HandleTypes(Error),
    /// Any other failure.
    Other(Error),
}

/// The driver version from which pools can be made for hardware decompression (CUDA 12.8, RMM's
/// `RMM_MIN_HWDECOMPRESS_CUDA_VERSION`).
const MIN_HW_DECOMPRESS_DRIVER: i32 = 12080;

/// Whether the driver is CUDA 12.8 or newer, so that pools are made for hardware decompression as
/// RMM's `cuda_async_memory_resource` makes them (`rmm::detail::hwdecompress::is_supported()`).
fn hw_decompress_supported() -> bool {
    let mut version: std::ffi::c_int = 0;
    // SAFETY: `version` is a valid out-pointer; the call needs no context.
    let status = unsafe { sys::cuDriverGetVersion(&mut version) };
    status == sys::CUresult::CUDA_SUCCESS && version >= MIN_HW_DECOMPRESS_DRIVER
}

/// `cuMemPoolCreate` of a pool of pinned device memory on `device` (current, with a context) that
/// can export `handle_types` (`CUmemAllocationHandleType` bits, 0 for none), made for hardware
/// decompression where the driver can (CUDA 12.8 or newer, as RMM's pools; if the driver refuses the
/// usage flag, the pool is made without it). Destroy it with [`destroy`].
pub(crate) fn create(
    device: DeviceId,
    handle_types: u32,
) -> std::result::Result<PoolHandle, CreateError> {
    if hw_decompress_supported() {
        match create_with_usage(
            device,
            handle_types,
            sys::CU_MEM_POOL_CREATE_USAGE_HW_DECOMPRESS as u16,
        ) {
            Err(CreateError::Other(_)) => {} // e.g. a device without the decompression engine: as before
            done => return done,
        }
    }
    create_with_usage(device, handle_types, 0)
}

/// [`create`] with the pool's `usage` flags.
fn create_with_usage(
    device: DeviceId,
    handle_types: u32,
    usage: u16,
) -> std::result::Result<PoolHandle, CreateError> {
    let props = sys::CUmemPoolProps {
        allocType: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        handleTypes: sys::CUmemAllocationHandleType(handle_types),
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        win32SecurityAttributes: std::ptr::null_mut(),
        maxSize: 0,
        usage,
        reserved: [0; 54],
    };
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: the caller made a context current; `pool` is a valid out-pointer and `props` a fully
    // initialised property struct (reserved bytes zero, as the driver requires).
    let status = unsafe { sys::cuMemPoolCreate(&mut pool, &props) };
    if handle_types != 0
        && matches!(
            status,
            sys::CUresult::CUDA_ERROR_NOT_SUPPORTED | sys::CUresult::CUDA_ERROR_NOT_PERMITTED
        )
    {
        return Err(CreateError::HandleTypes(cuda_error(
            status,
            "cuMemPoolCreate",
        )));
    }
    check(status, "cuMemPoolCreate").map_err(CreateError::Other)?;
    Ok(pool as PoolHandle)
}

/// `cuMemPoolDestroy`; the caller made the pool's device current. Allocations still outstanding
/// keep their memory: the driver releases the pool once they are freed.
///
/// # Safety
/// `pool` came from [`create`] and is destroyed once.
pub(crate) unsafe fn destroy(pool: PoolHandle) -> Result<()> {
    // SAFETY: caller contract.
    check(
        unsafe { sys::cuMemPoolDestroy(as_pool(pool)) },
        "cuMemPoolDestroy",
    )
}

/// `cuMemGetDefaultMemPool` of managed memory on `device` (current, with a context); callers check
/// `has_entry_point("cuMemGetDefaultMemPool")` first (CUDA 13+).
pub(crate) fn default_managed_pool(device: DeviceId) -> Result<PoolHandle> {
    let mut location = sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: device,
    };
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: a context is current; the entry point exists (caller's check); both pointers are valid.
    let status = unsafe {
        sys::cuMemGetDefaultMemPool(
            &mut pool,
            &mut location,
            sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_MANAGED,
        )
    };
    check(status, "cuMemGetDefaultMemPool")?;
    Ok(pool as PoolHandle)
}

/// Runs `call`, a driver call that needs a current context, optimistically: the thread almost
/// always has one, so it is not asked for first (`ensure_context` costs a `cuCtxGetCurrent` per
/// call, on the hot path of every stream-ordered allocation and free). When none is current the
/// driver answers `CUDA_ERROR_INVALID_CONTEXT` and has done nothing; then device 0's primary
/// context is made current, as `ensure_context` does, and `call` runs again.
fn with_context(mut call: impl FnMut() -> sys::CUresult) -> Result<sys::CUresult> {
    super::driver()?;
    let status = call();
    if status != sys::CUresult::CUDA_ERROR_INVALID_CONTEXT {
        return Ok(status);
    }
    ensure_context()?;
    Ok(call())
}

/// `cuMemAllocFromPoolAsync` of `bytes` on `stream`; 0 bytes gives null.
pub(crate) fn allocate(
    pool: PoolHandle,
    stream: Stream,
    bytes: usize,
    alignment: usize,
    resource: &str,
) -> Result<*mut u8> {
    check_base_alignment(alignment, resource)?;
    if bytes == 0 {
        return Ok(std::ptr::null_mut());
    }
    let mut ptr: sys::CUdeviceptr = 0;
    // SAFETY: `ptr` is a valid out-pointer; the pool handle is alive (the owning resource or the
    // view's constructor contract guarantees it); the stream is valid by `Stream`'s contract. The
    // pool may belong to another device than the stream. Without a current context the driver
    // refuses (and `with_context` makes one current and asks again).
    let status = with_context(|| unsafe {
        sys::cuMemAllocFromPoolAsync(&mut ptr, bytes, as_pool(pool), stream.as_cu())
    })?;
    check_alloc(status, "cuMemAllocFromPoolAsync", bytes, resource)?;
    Ok(ptr as *mut u8)
}

/// [`allocate`] with `check_size`, which runs after the argument checks and once a context is
/// current, before the driver is asked for memory (managed pools use it for the managed-size guard).
pub(crate) fn allocate_checked(
    pool: PoolHandle,
    stream: Stream,
    bytes: usize,
    alignment: usize,
    resource: &str,
    check_size: impl FnOnce(DeviceId) -> Result<()>,
) -> Result<*mut u8> {
    check_base_alignment(alignment, resource)?;
    if bytes == 0 {
        return Ok(std::ptr::null_mut());
    }
    check_size(ensure_context()?)?;
    allocate(pool, stream, bytes, alignment, resource)
}

/// `cuMemFreeAsync` of `ptr` on `stream`; null is a no-op.
///
/// # Safety
/// `ptr` must come from a pool allocation and must not be used after the work queued on `stream`.
pub(crate) unsafe fn deallocate(stream: Stream, ptr: *mut u8) -> Result<()> {
    if ptr.is_null() {
        return Ok(());
    }
    // SAFETY: caller contract; the stream is valid by `Stream`'s contract. Without a current
    // context the driver refuses (and `with_context` makes one current and asks again).
    let status =
        with_context(|| unsafe { sys::cuMemFreeAsync(ptr as sys::CUdeviceptr, stream.as_cu()) })?;
    check(status, "cuMemFreeAsync")
}

/// A 64-bit pool attribute.
pub(crate) fn get_u64(pool: PoolHandle, attribute: PoolAttribute) -> Result<u64> {
    ensure_context()?;
    let mut value: u64 = 0;
    // SAFETY: the pool is alive (callers own or borrow it); the attributes of `PoolAttribute` are
    // 64-bit (cuuint64_t), so `value` is a valid out-pointer of the right size.
    let status = unsafe {
        sys::cuMemPoolGetAttribute(
            as_pool(pool),
            attribute.raw(),
            (&mut value as *mut u64).cast(),
        )
    };
    check(status, "cuMemPoolGetAttribute")?;
    Ok(value)
}

/// Sets a 64-bit pool attribute.
pub(crate) fn set_u64(pool: PoolHandle, attribute: PoolAttribute, mut value: u64) -> Result<()> {
    ensure_context()?;
    // SAFETY: the pool is alive (callers own it); the attributes of `PoolAttribute` are 64-bit
    // (cuuint64_t), so `value` is a valid pointer of the right size, read during the call only.
    let status = unsafe {
        sys::cuMemPoolSetAttribute(
            as_pool(pool),
            attribute.raw(),
            (&mut value as *mut u64).cast(),
        )
    };
    check(status, "cuMemPoolSetAttribute")
}
