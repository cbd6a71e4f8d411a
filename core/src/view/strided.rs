//! [`StridedMemoryView`]: a typed, strided, read-only description of memory someone else owns,
//! and [`rmm_strided_view`], its C struct (`rmm_c.h`), whose fields C, C++, Cython and Rust read
//! without calls.
//!
//! A view holds: the address of element `[0, ..., 0]`, shape and strides (in items as DLPack, and
//! in bytes), the DLPack dtype with its item size and format string, the device, whether the data
//! is device-accessible and read-only, and a [`ViewOwner`] that keeps the producer alive until the
//! view is dropped (released). Shape, strides and format live in storage the view owns (or that a
//! binding provides through [`MetaStore`]) at stable addresses, which the C struct points into.
//!
//! 0-d views (no shape), empty views (an extent of 0), negative strides (reversed axes) and zero
//! strides (broadcast) are all representable; nothing here reads or writes the data.
//!
//! What no view may describe, whatever made it (DLPack, parts, a binding's import), is refused
//! with [`Error::InvalidArgument`] before the view exists: a device type DLPack does not define or a
//! negative device id; a CUDA device when there is no GPU (host mode) or one past the device
//! count; a stride of `INT64_MIN` (its magnitude is not an `int64`); elements at a NULL address;
//! bytes that reach below address 0 or past the end of the address space; a DLPack `byte_offset`
//! that wraps the address.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::dlpack::{
    device_type, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion,
    DLTensor, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, DLPACK_FLAG_BITMASK_READ_ONLY,
    DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION,
};
use super::format::{format_of, itemsize_of};
use super::owner::{ManagedTensor, ManagedTensorVersioned, ViewOwner};
use crate::error::{Error, Result};

/// The most dimensions a view accepts (DLPack has no limit; NumPy's is 64).
pub const MAX_NDIM: usize = 64;

/// The C struct of a view (`rmm_strided_view` in `rmm_c.h`). Every pointer stays valid until the
/// view is released; `generation` is non-zero while it is acquired and 0 after release.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rmm_strided_view {
    /// Address of element `[0, ..., 0]` (DLPack's `data + byte_offset`).
    pub ptr: usize,
    /// Number of dimensions (0 for a scalar).
    pub ndim: c_int,
    /// `ndim` extents.
    pub shape: *const i64,
    /// `ndim` strides in items (DLPack's unit).
    pub strides: *const i64,
    /// `ndim` strides in bytes (the buffer protocol's and the CUDA array interface's unit).
    pub byte_strides: *const i64,
    /// Bytes per item.
    pub itemsize: i64,
    /// The DLPack dtype.
    pub dtype: DLDataType,
    /// The format string, NUL-terminated (`"<f4"`; see `view::format`).
    pub format: *const c_char,
    /// A DLPack `DLDeviceType` (`1` CPU, `2` CUDA, `3` CUDA host, `13` CUDA managed, ...).
    pub device_type: c_int,
    /// The device ordinal (0 for the host).
    pub device_id: c_int,
    /// True when CUDA kernels can read the data (CUDA, pinned host or managed memory).
    pub device_accessible: bool,
    /// True when the data must not be written through this view.
    pub readonly: bool,
    /// Identifies the producer that the view keeps alive (opaque; never dereference).
    pub owner: *const std::ffi::c_void,
    /// For a view made device-accessible: this struct in device memory, whose `shape`, `strides`,
    /// `byte_strides` and `format` point to device memory (a kernel argument). NULL otherwise.
    pub device_copy: *const rmm_strided_view,
    /// Non-zero and unique while the view is acquired; 0 once released (the validity word).
    pub generation: u64,
}

impl rmm_strided_view {
    /// The released (or never acquired) view: every pointer NULL, generation 0.
    pub const EMPTY: rmm_strided_view = rmm_strided_view {
        ptr: 0,
        ndim: 0,
        shape: std::ptr::null(),
        strides: std::ptr::null(),
        byte_strides: std::ptr::null(),
        itemsize: 0,
        dtype: DLDataType {
            code: 0,
            bits: 0,
            lanes: 0,
        },
        format: std::ptr::null(),
        device_type: 0,
        device_id: 0,
        device_accessible: false,
        readonly: true,
        owner: std::ptr::null(),
        device_copy: std::ptr::null(),
        generation: 0,
    };

    /// True while acquired (the validity word is non-zero). A struct from another binary (Python's
    /// `c_view_address`, C) is only read through the accessors below while this holds.
    pub fn is_live(&self) -> bool {
        self.generation != 0
    }

    /// The extents as a slice (empty for a 0-d or released view).
    ///
    /// # Safety
    /// The struct was filled by an acquire call and not released since (its pointers are valid).
    pub unsafe fn shape_slice(&self) -> &[i64] {
        // SAFETY: caller contract.
        unsafe { words(self.shape, self.ndim) }
    }

    /// The strides in items as a slice.
    ///
    /// # Safety
    /// As [`shape_slice`](Self::shape_slice).
    pub unsafe fn strides_slice(&self) -> &[i64] {
        // SAFETY: caller contract.
        unsafe { words(self.strides, self.ndim) }
    }

    /// The strides in bytes as a slice.
    ///
    /// # Safety
    /// As [`shape_slice`](Self::shape_slice).
    pub unsafe fn byte_strides_slice(&self) -> &[i64] {
        // SAFETY: caller contract.
        unsafe { words(self.byte_strides, self.ndim) }
    }

    /// The format string ("" when NULL).
    ///
    /// # Safety
    /// As [`shape_slice`](Self::shape_slice).
    pub unsafe fn format_str(&self) -> &str {
        if self.format.is_null() {
            return "";
        }
        // SAFETY: caller contract: a NUL-terminated ASCII string.
        unsafe { std::ffi::CStr::from_ptr(self.format) }
            .to_str()
            .unwrap_or("")
    }
}

/// `ndim` words at `p` (empty for NULL or ndim ≤ 0).
///
/// # Safety
/// `p` is NULL or points to `ndim` words.
unsafe fn words<'a>(p: *const i64, ndim: c_int) -> &'a [i64] {
    match usize::try_from(ndim) {
        // SAFETY: caller contract.
        Ok(n) if n > 0 && !p.is_null() => unsafe { std::slice::from_raw_parts(p, n) },
        _ => &[],
    }
}

/// Storage for a view's `3 × ndim` int64 words (shape, strides, byte strides, in that order) at a
/// stable address. A `Vec<i64>` by default; a binding may provide its own (Python keeps them in an
/// object that `memoryview`s can share without a copy).
pub trait MetaStore: Send + Sync + 'static {
    /// The words; the same address for the store's whole life.
    fn words(&self) -> &[i64];
    /// The words, for filling them in once at construction.
    fn words_mut(&mut self) -> &mut [i64];
}

impl MetaStore for Vec<i64> {
    fn words(&self) -> &[i64] {
        self
    }
    fn words_mut(&mut self) -> &mut [i64] {
        self
    }
}

/// What a view describes, before it is checked and made into a [`StridedMemoryView`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewParts {
    /// Address of element `[0, ..., 0]`.
    pub ptr: usize,
    /// Extents.
    pub shape: Vec<i64>,
    /// Strides in items; `None` for a C-contiguous (row-major) array.
    pub strides: Option<Vec<i64>>,
    /// The item type.
    pub dtype: DLDataType,
    /// Where the memory is.
    pub device: DLDevice,
    /// True when the data must not be written.
    pub readonly: bool,
    /// Sub-byte items are padded to one byte each (DLPack's `IS_SUBBYTE_TYPE_PADDED`).
    pub subbyte_padded: bool,
}

/// Item strides of a C-contiguous array of `shape`.
pub fn c_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0; shape.len()];
    let mut step: i64 = 1;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = step;
        step = step.saturating_mul(n.max(1));
    }
    strides
}

/// Item strides from byte strides (CUDA array interface, buffer protocol).
///
/// # Errors
/// [`Error::InvalidArgument`] when a byte stride is not a multiple of `itemsize`.
pub fn item_strides(byte_strides: &[i64], itemsize: i64) -> Result<Vec<i64>> {
    byte_strides
        .iter()
        .map(|&b| {
            if itemsize > 0 && b % itemsize == 0 {
                Ok(b / itemsize)
            } else {
                Err(Error::invalid(format!(
                    "byte stride {b} is not a multiple of the item size {itemsize}"
                )))
            }
        })
        .collect()
}

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// This copy's views that are alive (made and not yet dropped), by generation, with the `ptr` and
/// `shape` of their structs (what [`check_alive`] compares).
fn alive() -> &'static Mutex<HashMap<u64, (usize, usize)>> {
    static ALIVE: OnceLock<Mutex<HashMap<u64, (usize, usize)>>> = OnceLock::new();
    ALIVE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// `Ok` when `raw` is the struct of a view of this copy of rmm-core that is alive (acquired and
/// not yet released, whoever holds it: C, Rust or Python), or an unchanged copy of one.
///
/// # Errors
/// [`Error::InvalidArgument`] saying why not: released (generation 0), not live (released through
/// a copy, never acquired, or another copy's), or its fields changed after it was acquired.
pub fn check_alive(raw: &rmm_strided_view) -> Result<()> {
    if raw.generation == 0 {
        return Err(Error::invalid(
            "the strided view was released (or never acquired)",
        ));
    }
    match alive().lock().unwrap_or_else(PoisonError::into_inner).get(&raw.generation) {
        None => Err(Error::invalid(format!(
            "the strided view (generation {}) is not live: released through a copy, or never acquired",
            raw.generation
        ))),
        Some(&(ptr, shape)) if shape != raw.shape as usize || ptr != raw.ptr => Err(Error::invalid(
            "the strided view's fields were changed after it was acquired",
        )),
        Some(_) => Ok(()),
    }
}

/// A typed strided view of memory kept alive by its [`ViewOwner`]; dropping it is the release.
pub struct StridedMemoryView {
    raw: Box<rmm_strided_view>,
    meta: Box<dyn MetaStore>,
    format: CString,
    owner: Option<ViewOwner>,
    /// Keeps the device copy of the metadata of a view made by `to_device` (`view::device`).
    pub(super) device_meta: Option<Box<dyn Send + Sync>>,
}

// SAFETY: the raw pointers point into `meta` and `format`, owned by the view and never changed after
// construction; the data itself is only described, never accessed.
unsafe impl Send for StridedMemoryView {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for StridedMemoryView {}

impl Drop for StridedMemoryView {
    fn drop(&mut self) {
        alive()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.raw.generation);
    }
}

impl std::fmt::Debug for StridedMemoryView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StridedMemoryView")
            .field("ptr", &format_args!("{:#x}", self.ptr()))
            .field("shape", &self.shape())
            .field("strides", &self.strides())
            .field("format", &self.format())
            .field("device", &self.device())
            .field("readonly", &self.readonly())
            .finish()
    }
}

impl StridedMemoryView {
    /// A view of `parts`, keeping `owner` alive, with its metadata in a new `Vec`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative extent, more than [`MAX_NDIM`] dimensions, strides
    /// of the wrong length, or sizes that overflow; [`Error::Unsupported`] for a dtype with no
    /// format string or packed sub-byte items.
    pub fn new(parts: ViewParts, owner: Option<ViewOwner>) -> Result<Self> {
        let words = vec![0; 3 * parts.shape.len()];
        Self::with_store(parts, owner, Box::new(words))
    }

    /// As [`new`](Self::new), with the metadata in `store` (exactly `3 × ndim` words).
    ///
    /// # Errors
    /// As [`new`](Self::new), and [`Error::InvalidArgument`] for a store of the wrong length.
    pub fn with_store(
        parts: ViewParts,
        owner: Option<ViewOwner>,
        mut store: Box<dyn MetaStore>,
    ) -> Result<Self> {
        let ndim = parts.shape.len();
        if ndim > MAX_NDIM {
            return Err(Error::invalid(format!(
                "{ndim} dimensions: at most {MAX_NDIM} are supported"
            )));
        }
        if let Some(&n) = parts.shape.iter().find(|&&n| n < 0) {
            return Err(Error::invalid(format!(
                "negative extent {n} in shape {:?}",
                parts.shape
            )));
        }
        let strides = match parts.strides {
            Some(s) if s.len() != ndim => {
                return Err(Error::invalid(format!(
                    "{} strides for {ndim} dimensions",
                    s.len()
                )))
            }
            Some(s) => s,
            None => c_strides(&parts.shape),
        };
        let itemsize = itemsize_of(parts.dtype, parts.subbyte_padded)?;
        let overflow = || {
            Error::invalid(format!(
                "shape {:?} with strides {strides:?} overflows",
                parts.shape
            ))
        };
        let mut items: i64 = 1;
        for &n in &parts.shape {
            items = items.checked_mul(n).ok_or_else(overflow)?;
        }
        items.checked_mul(itemsize).ok_or_else(overflow)?;
        let mut byte_strides = Vec::with_capacity(ndim);
        for &s in &strides {
            if s == i64::MIN {
                return Err(Error::invalid(format!(
                    "stride {s} in {strides:?}: its magnitude is not an int64"
                )));
            }
            byte_strides.push(s.checked_mul(itemsize).ok_or_else(overflow)?);
        }
        check_device(parts.device)?;
        check_span(parts.ptr, &parts.shape, &byte_strides, itemsize)?;
        let words = store.words_mut();
        if words.len() != 3 * ndim {
            return Err(Error::invalid(format!(
                "metadata store of {} words for {ndim} dimensions",
                words.len()
            )));
        }
        words[..ndim].copy_from_slice(&parts.shape);
        words[ndim..2 * ndim].copy_from_slice(&strides);
        words[2 * ndim..].copy_from_slice(&byte_strides);
        let format = CString::new(format_of(parts.dtype)?).expect("format strings have no NUL");
        let base = store.words().as_ptr();
        let at = |i: usize| {
            if ndim == 0 {
                std::ptr::null()
            } else {
                base.wrapping_add(i * ndim)
            }
        };
        let raw = rmm_strided_view {
            ptr: parts.ptr,
            ndim: ndim as c_int,
            shape: at(0),
            strides: at(1),
            byte_strides: at(2),
            itemsize,
            dtype: parts.dtype,
            format: format.as_ptr(),
            device_type: parts.device.device_type,
            device_id: parts.device.device_id,
            device_accessible: device_type::is_cuda_accessible(parts.device.device_type),
            readonly: parts.readonly,
            owner: owner.as_ref().map_or(std::ptr::null(), ViewOwner::id),
            device_copy: std::ptr::null(),
            // The copy of rmm-core that acquired the view, in the top bits (`view::domain`).
            generation: NEXT_GENERATION.fetch_add(1, Ordering::Relaxed)
                | super::domain::view_domain_bits(),
        };
        alive()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(raw.generation, (raw.ptr, raw.shape as usize));
        Ok(StridedMemoryView {
            raw: Box::new(raw),
            meta: store,
            format,
            owner,
            device_meta: None,
        })
    }

    /// A view of a DLPack 1.x tensor, which it takes over: the tensor's deleter runs when the view
    /// (and every view or export sharing its owner) is dropped.
    ///
    /// # Safety
    /// `tensor` is a live managed tensor (non-NULL) that nobody else will delete. On error it is
    /// NOT taken over (the caller still owns it).
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a major version other than 1; the errors of [`new`](Self::new).
    pub unsafe fn from_dlpack_versioned(tensor: *mut DLManagedTensorVersioned) -> Result<Self> {
        // SAFETY: caller contract.
        let t = unsafe { tensor.as_ref() }
            .ok_or_else(|| Error::invalid("the DLPack tensor must not be NULL"))?;
        if t.version.major != DLPACK_MAJOR_VERSION {
            return Err(Error::Unsupported(format!(
                "DLPack {}.{} tensor: only major version {DLPACK_MAJOR_VERSION} is supported",
                t.version.major, t.version.minor
            )));
        }
        let readonly = t.flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0;
        let padded = t.flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0;
        // SAFETY: the tensor is live (caller contract).
        let parts = unsafe { parts_of(&t.dl_tensor, readonly, padded)? };
        // Check everything before taking the tensor over, so that an error leaves it to the caller.
        let view = Self::new(parts, None)?;
        // SAFETY: caller contract; from here the view owns it.
        let owner = ViewOwner::new(unsafe { ManagedTensorVersioned::new(tensor) });
        Ok(view.with_owner(owner))
    }

    /// A view of a legacy (unversioned) DLPack tensor, which it takes over as
    /// [`from_dlpack_versioned`](Self::from_dlpack_versioned) does. Legacy tensors carry no
    /// read-only flag: the view is writable.
    ///
    /// # Safety
    /// As [`from_dlpack_versioned`](Self::from_dlpack_versioned).
    ///
    /// # Errors
    /// The errors of [`new`](Self::new).
    pub unsafe fn from_dlpack(tensor: *mut DLManagedTensor) -> Result<Self> {
        // SAFETY: caller contract.
        let t = unsafe { tensor.as_ref() }
            .ok_or_else(|| Error::invalid("the DLPack tensor must not be NULL"))?;
        // SAFETY: the tensor is live (caller contract).
        let parts = unsafe { parts_of(&t.dl_tensor, false, false)? };
        let view = Self::new(parts, None)?;
        // SAFETY: caller contract; from here the view owns it.
        let owner = ViewOwner::new(unsafe { ManagedTensor::new(tensor) });
        Ok(view.with_owner(owner))
    }

    fn with_owner(mut self, owner: ViewOwner) -> Self {
        self.raw.owner = owner.id();
        self.owner = Some(owner);
        self
    }

    /// The C struct (its pointers live as long as `self`).
    pub fn as_raw(&self) -> &rmm_strided_view {
        &self.raw
    }

    /// Address of element `[0, ..., 0]`.
    pub fn ptr(&self) -> usize {
        self.raw.ptr
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.raw.ndim as usize
    }

    fn words(&self, i: usize) -> &[i64] {
        let n = self.ndim();
        &self.meta.words()[i * n..(i + 1) * n]
    }

    /// Extents.
    pub fn shape(&self) -> &[i64] {
        self.words(0)
    }

    /// Strides in items.
    pub fn strides(&self) -> &[i64] {
        self.words(1)
    }

    /// Strides in bytes.
    pub fn byte_strides(&self) -> &[i64] {
        self.words(2)
    }

    /// Bytes per item.
    pub fn itemsize(&self) -> i64 {
        self.raw.itemsize
    }

    /// The DLPack dtype.
    pub fn dtype(&self) -> DLDataType {
        self.raw.dtype
    }

    /// The format string (`"<f4"`).
    pub fn format(&self) -> &str {
        self.format.to_str().expect("format strings are ASCII")
    }

    /// Where the memory is.
    pub fn device(&self) -> DLDevice {
        DLDevice {
            device_type: self.raw.device_type,
            device_id: self.raw.device_id,
        }
    }

    /// True when CUDA kernels can read the data.
    pub fn device_accessible(&self) -> bool {
        self.raw.device_accessible
    }

    /// True when the data must not be written through this view.
    pub fn readonly(&self) -> bool {
        self.raw.readonly
    }

    /// The owner that keeps the producer alive, if any.
    pub fn owner(&self) -> Option<&ViewOwner> {
        self.owner.as_ref()
    }

    /// The unique, non-zero generation of this view (the C struct's validity word).
    pub fn generation(&self) -> u64 {
        self.raw.generation
    }

    /// The number of items (1 for a 0-d view, 0 for an empty one).
    pub fn len(&self) -> i64 {
        self.shape().iter().product()
    }

    /// True when the view has no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True for row-major contiguous data (extents of 1 may have any stride; empty views are).
    pub fn is_c_contiguous(&self) -> bool {
        contiguous(self.shape(), self.strides(), true)
    }

    /// True for column-major contiguous data.
    pub fn is_f_contiguous(&self) -> bool {
        contiguous(self.shape(), self.strides(), false)
    }

    /// The lowest and one-past-the-highest byte offsets from [`ptr`](Self::ptr) that the view
    /// touches (`(0, 0)` when empty): negative strides make the first one negative.
    pub fn byte_extent(&self) -> (i64, i64) {
        if self.is_empty() {
            return (0, 0);
        }
        let (mut lo, mut hi) = (0i64, 0i64);
        for (&n, &b) in self.shape().iter().zip(self.byte_strides()) {
            let far = (n - 1).saturating_mul(b);
            if far < 0 {
                lo = lo.saturating_add(far);
            } else {
                hi = hi.saturating_add(far);
            }
        }
        (lo, hi.saturating_add(self.itemsize()))
    }

    /// The DLPack tensor this view describes (shape and strides borrowed from the view).
    fn dl_tensor(&self) -> DLTensor {
        let ndim = self.ndim();
        DLTensor {
            data: self.ptr() as *mut std::ffi::c_void,
            device: self.device(),
            ndim: ndim as i32,
            dtype: self.dtype(),
            shape: self.raw.shape as *mut i64,
            strides: self.raw.strides as *mut i64,
            byte_offset: 0,
        }
    }

    /// Exports the view as a DLPack 1.1 tensor that shares the view's owner (the producer stays alive
    /// until the consumer calls the deleter) and its own copy of the metadata. `extra_flags` are
    /// or-ed into the flags (e.g. `IS_COPIED`); `READ_ONLY` is set for a read-only view.
    pub fn to_dlpack_versioned(&self, extra_flags: u64) -> *mut DLManagedTensorVersioned {
        let ctx = Box::new(ExportCtx { view: self.share() });
        let mut flags = extra_flags;
        if self.readonly() {
            flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
        }
        if self.dtype().bits % 8 != 0 {
            flags |= DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
        }
        let dl_tensor = ctx.view.dl_tensor();
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion {
                major: DLPACK_MAJOR_VERSION,
                minor: DLPACK_MINOR_VERSION,
            },
            manager_ctx: Box::into_raw(ctx).cast(),
            deleter: Some(delete_versioned),
            flags,
            dl_tensor,
        }))
    }

    /// Exports the view as a legacy (unversioned) DLPack tensor; see
    /// [`to_dlpack_versioned`](Self::to_dlpack_versioned).
    pub fn to_dlpack(&self) -> *mut DLManagedTensor {
        let ctx = Box::new(ExportCtx { view: self.share() });
        let dl_tensor = ctx.view.dl_tensor();
        Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor,
            manager_ctx: Box::into_raw(ctx).cast(),
            deleter: Some(delete_legacy),
        }))
    }

    /// A new view of the same memory sharing the owner (a new generation, its own metadata).
    pub fn share(&self) -> StridedMemoryView {
        self.share_with_store(Box::new(vec![0; 3 * self.ndim()]))
            .expect("a valid view's parts are valid")
    }

    /// As [`share`](Self::share), with the new view's metadata in `store` (`3 × ndim` words).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a store of the wrong length.
    pub fn share_with_store(&self, store: Box<dyn MetaStore>) -> Result<StridedMemoryView> {
        let parts = ViewParts {
            ptr: self.ptr(),
            shape: self.shape().to_vec(),
            strides: Some(self.strides().to_vec()),
            dtype: self.dtype(),
            device: self.device(),
            readonly: self.readonly(),
            subbyte_padded: true,
        };
        let mut view = Self::with_store(parts, None, store)?;
        if let Some(owner) = &self.owner {
            view = view.with_owner(owner.clone());
        }
        Ok(view)
    }

    pub(super) fn raw_mut(&mut self) -> &mut rmm_strided_view {
        &mut self.raw
    }
}

/// The context of an exported tensor: a view sharing the owner, holding the metadata.
struct ExportCtx {
    view: StridedMemoryView,
}

unsafe extern "C" fn delete_versioned(t: *mut DLManagedTensorVersioned) {
    if t.is_null() {
        return;
    }
    // SAFETY: `t` and its context were made by `to_dlpack_versioned` with Box::into_raw; DLPack's
    // contract is that the deleter runs once.
    let _ = std::panic::catch_unwind(|| unsafe {
        let t = Box::from_raw(t);
        drop(Box::from_raw(t.manager_ctx.cast::<ExportCtx>()));
    });
}

unsafe extern "C" fn delete_legacy(t: *mut DLManagedTensor) {
    if t.is_null() {
        return;
    }
    // SAFETY: as delete_versioned, for `to_dlpack`.
    let _ = std::panic::catch_unwind(|| unsafe {
        let t = Box::from_raw(t);
        drop(Box::from_raw(t.manager_ctx.cast::<ExportCtx>()));
    });
}

/// The parts of a DLTensor.
///
/// # Safety
/// `t`'s shape and strides point to `ndim` items (strides may be NULL).
unsafe fn parts_of(t: &DLTensor, readonly: bool, padded: bool) -> Result<ViewParts> {
    let ndim =
        usize::try_from(t.ndim).map_err(|_| Error::invalid(format!("negative ndim {}", t.ndim)))?;
    if ndim > MAX_NDIM {
        return Err(Error::invalid(format!(
            "{ndim} dimensions: at most {MAX_NDIM} are supported"
        )));
    }
    if ndim > 0 && t.shape.is_null() {
        return Err(Error::invalid("the DLPack tensor's shape is NULL"));
    }
    let shape = if ndim == 0 {
        Vec::new()
    } else {
        // SAFETY: caller contract.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }.to_vec()
    };
    let strides = if ndim == 0 || t.strides.is_null() {
        None
    } else {
        // SAFETY: caller contract.
        Some(unsafe { std::slice::from_raw_parts(t.strides, ndim) }.to_vec())
    };
    let offset =
        usize::try_from(t.byte_offset).map_err(|_| Error::invalid("byte_offset too large"))?;
    if t.data.is_null() && offset != 0 {
        return Err(Error::invalid(format!(
            "the DLPack tensor's data is NULL with a byte_offset of {offset}"
        )));
    }
    let ptr = (t.data as usize).checked_add(offset).ok_or_else(|| {
        Error::invalid(format!(
            "the DLPack tensor's data {:p} + byte_offset {offset} wraps around the address space",
            t.data
        ))
    })?;
    Ok(ViewParts {
        ptr,
        shape,
        strides,
        dtype: t.dtype,
        device: t.device,
        readonly,
        subbyte_padded: padded,
    })
}

/// Refuses a device no view can be on: a device type DLPack does not define, a negative id, a
/// CUDA device without a GPU (host mode) or past the device count.
fn check_device(device: DLDevice) -> Result<()> {
    use device_type as dt;
    let DLDevice {
        device_type: kind,
        device_id: id,
    } = device;
    let known = matches!(
        kind,
        dt::CPU
            | dt::CUDA
            | dt::CUDA_HOST
            | dt::OPENCL
            | dt::VULKAN
            | dt::METAL
            | dt::VPI
            | dt::ROCM
            | dt::ROCM_HOST
            | dt::EXT_DEV
            | dt::CUDA_MANAGED
            | dt::ONE_API
            | dt::WEB_GPU
            | dt::HEXAGON
            | dt::MAIA
    );
    if !known {
        return Err(Error::invalid(format!(
            "device type {kind} is not a DLPack device type"
        )));
    }
    if id < 0 {
        return Err(Error::invalid(format!(
            "device id {id} (device type {kind}) is negative"
        )));
    }
    if dt::is_cuda_accessible(kind) {
        if crate::cuda::is_host_mode() {
            return Err(Error::invalid(format!(
                "a CUDA device (type {kind}, id {id}) in host mode: there is no GPU"
            )));
        }
        if kind != dt::CUDA_HOST {
            let count = crate::cuda::device_count()?;
            if id >= count {
                return Err(Error::invalid(format!(
                    "CUDA device {id} does not exist ({count} devices)"
                )));
            }
        }
    }
    Ok(())
}

/// Refuses elements at a NULL address and bytes outside the address space: the lowest and
/// one-past-the-highest byte the view reaches from `ptr` must lie in `[0, 2^64]`.
fn check_span(ptr: usize, shape: &[i64], byte_strides: &[i64], itemsize: i64) -> Result<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    if ptr == 0 {
        return Err(Error::invalid(format!(
            "the data is NULL but the view has elements (shape {shape:?})"
        )));
    }
    // In i128 nothing overflows: at most 64 terms of at most 2^126 each.
    let (mut lo, mut hi) = (0i128, i128::from(itemsize));
    for (&n, &b) in shape.iter().zip(byte_strides) {
        let far = i128::from(n - 1) * i128::from(b);
        if far < 0 {
            lo += far;
        } else {
            hi += far;
        }
    }
    let start = ptr as i128;
    if start + lo < 0 || start + hi > usize::MAX as i128 + 1 {
        return Err(Error::invalid(format!(
            "shape {shape:?} with byte strides {byte_strides:?} at {ptr:#x} reaches bytes [{:#x}, {:#x}) outside the \
             address space",
            start + lo,
            start + hi
        )));
    }
    Ok(())
}

/// Contiguity in row-major (`c`) or column-major order; extents of 1 may have any stride.
fn contiguous(shape: &[i64], strides: &[i64], c: bool) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut expect: i64 = 1;
    let dims: Box<dyn Iterator<Item = (&i64, &i64)>> = if c {
        Box::new(shape.iter().zip(strides).rev())
    } else {
        Box::new(shape.iter().zip(strides))
    };
    for (&n, &s) in dims {
        if n != 1 && s != expect {
            return false;
        }
        expect = expect.saturating_mul(n);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::dlpack::type_code as tc;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    fn f32_parts(shape: Vec<i64>, strides: Option<Vec<i64>>) -> ViewParts {
        ViewParts {
            ptr: 0x1000,
            shape,
            strides,
            dtype: DLDataType::new(tc::FLOAT, 32),
            device: DLDevice {
                device_type: device_type::CPU,
                device_id: 0,
            },
            readonly: false,
            subbyte_padded: false,
        }
    }

    #[test]
    fn a_contiguous_view_has_c_strides_and_its_c_struct_points_at_them() {
        let v = StridedMemoryView::new(f32_parts(vec![2, 3, 4], None), None).unwrap();
        assert_eq!(v.strides(), &[12, 4, 1]);
        assert_eq!(v.byte_strides(), &[48, 16, 4]);
        assert!(v.is_c_contiguous() && !v.is_f_contiguous());
        assert_eq!(v.format(), "<f4");
        let raw = v.as_raw();
        // SAFETY: the view is alive.
        unsafe {
            assert_eq!(raw.shape_slice(), &[2, 3, 4]);
            assert_eq!(raw.strides_slice(), &[12, 4, 1]);
            assert_eq!(raw.byte_strides_slice(), &[48, 16, 4]);
            assert_eq!(raw.format_str(), "<f4");
        }
        assert!(raw.is_live() && !rmm_strided_view::EMPTY.is_live());
        // SAFETY: the view is alive; the pointers have ndim items.
        unsafe {
            assert_eq!(std::slice::from_raw_parts(raw.shape, 3), &[2, 3, 4]);
            assert_eq!(
                std::slice::from_raw_parts(raw.byte_strides, 3),
                &[48, 16, 4]
            );
            assert_eq!(
                std::ffi::CStr::from_ptr(raw.format).to_str().unwrap(),
                "<f4"
            );
        }
        assert_ne!(raw.generation, 0);
        assert!(!raw.device_accessible);
        assert_eq!(v.byte_extent(), (0, 96));
    }

    #[test]
    fn zero_d_empty_negative_and_broadcast_views() {
        let scalar = StridedMemoryView::new(f32_parts(vec![], None), None).unwrap();
        assert_eq!((scalar.ndim(), scalar.len()), (0, 1));
        assert!(scalar.is_c_contiguous() && scalar.is_f_contiguous());
        assert!(scalar.as_raw().shape.is_null());
        assert_eq!(scalar.byte_extent(), (0, 4));

        let empty = StridedMemoryView::new(f32_parts(vec![3, 0], Some(vec![7, 2])), None).unwrap();
        assert!(empty.is_empty() && empty.is_c_contiguous());
        assert_eq!(empty.byte_extent(), (0, 0));

        let reversed = StridedMemoryView::new(f32_parts(vec![5], Some(vec![-1])), None).unwrap();
        assert_eq!(reversed.byte_strides(), &[-4]);
        assert!(!reversed.is_c_contiguous());
        assert_eq!(reversed.byte_extent(), (-16, 4));

        let broadcast =
            StridedMemoryView::new(f32_parts(vec![4, 3], Some(vec![0, 1])), None).unwrap();
        assert_eq!(broadcast.byte_strides(), &[0, 4]);
        assert!(!broadcast.is_c_contiguous());
        assert_eq!(broadcast.byte_extent(), (0, 12));

        let fortran =
            StridedMemoryView::new(f32_parts(vec![2, 3], Some(vec![1, 2])), None).unwrap();
        assert!(fortran.is_f_contiguous() && !fortran.is_c_contiguous());
    }

    #[test]
    fn bad_parts_are_typed_errors() {
        assert!(StridedMemoryView::new(f32_parts(vec![-1], None), None).is_err());
        assert!(StridedMemoryView::new(f32_parts(vec![2, 2], Some(vec![1])), None).is_err());
        assert!(StridedMemoryView::new(f32_parts(vec![1; 65], None), None).is_err());
        assert!(StridedMemoryView::new(f32_parts(vec![i64::MAX, 2], None), None).is_err());
        let mut bad_type = f32_parts(vec![1], None);
        bad_type.dtype = DLDataType::new(tc::INT, 12);
        assert!(matches!(
            StridedMemoryView::new(bad_type, None),
            Err(Error::Unsupported(_))
        ));
        assert_eq!(item_strides(&[8, 4], 4).unwrap(), vec![2, 1]);
        assert!(item_strides(&[6], 4).is_err());
    }

    /// Issue 30: malformed views are refused, whatever they came from.
    #[test]
    fn malformed_views_are_refused() {
        let refused = |parts: ViewParts, what: &str| match StridedMemoryView::new(parts, None) {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("{what}: {other:?}"),
        };
        let u8_parts = |ptr: usize, shape: Vec<i64>, strides: Option<Vec<i64>>| ViewParts {
            dtype: DLDataType::new(tc::UINT, 8),
            ptr,
            ..f32_parts(shape, strides)
        };
        let m = refused(u8_parts(0, vec![2], None), "NULL data with elements");
        assert!(m.contains("NULL"), "{m}");
        assert!(
            StridedMemoryView::new(u8_parts(0, vec![0, 3], None), None).is_ok(),
            "NULL and empty is fine"
        );
        let m = refused(
            u8_parts(usize::MAX - 100, vec![1000], None),
            "a span past the address space",
        );
        assert!(m.contains("outside the address space"), "{m}");
        assert!(
            StridedMemoryView::new(u8_parts(usize::MAX - 999, vec![1000], None), None).is_ok(),
            "up to the end"
        );
        let m = refused(
            u8_parts(0x1000, vec![0x2000], Some(vec![-1])),
            "a span below address 0",
        );
        assert!(m.contains("outside the address space"), "{m}");
        for shape in [vec![1], vec![2]] {
            let m = refused(
                u8_parts(0x1000, shape, Some(vec![i64::MIN])),
                "INT64_MIN stride",
            );
            assert!(m.contains("not an int64"), "{m}");
        }
        let on = |device_type, device_id| ViewParts {
            device: DLDevice {
                device_type,
                device_id,
            },
            ..f32_parts(vec![4], None)
        };
        let m = refused(on(99, 0), "device type 99");
        assert!(m.contains("not a DLPack device type"), "{m}");
        let m = refused(on(device_type::CPU, -7), "device id -7");
        assert!(m.contains("negative"), "{m}");
        if crate::cuda::is_host_mode() {
            for kind in [
                device_type::CUDA,
                device_type::CUDA_HOST,
                device_type::CUDA_MANAGED,
            ] {
                let m = refused(on(kind, 0), "a CUDA device in host mode");
                assert!(m.contains("host mode"), "{m}");
            }
        } else {
            let m = refused(
                on(device_type::CUDA, 1 << 20),
                "a CUDA device past the count",
            );
            assert!(m.contains("does not exist"), "{m}");
        }
        assert!(
            StridedMemoryView::new(on(device_type::ROCM, 3), None).is_ok(),
            "other devices are described"
        );
    }

    #[test]
    fn a_dlpack_offset_that_wraps_or_a_null_base_with_an_offset_is_refused_and_not_taken() {
        let deleted = Arc::new(AtomicUsize::new(0));
        for (round, (data, offset)) in [(usize::MAX - 8, 16u64), (0, 8)].into_iter().enumerate() {
            let t = produce(&deleted, 1, 0);
            // SAFETY: a fresh tensor, fields changed before it is handed over.
            unsafe {
                (*t).dl_tensor.data = data as *mut std::ffi::c_void;
                (*t).dl_tensor.byte_offset = offset;
            }
            // SAFETY: refused tensors stay the caller's.
            let err = unsafe { StridedMemoryView::from_dlpack_versioned(t) }.unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(m) if m.contains("byte_offset")),
                "{err}"
            );
            assert_eq!(deleted.load(Ordering::SeqCst), round, "not taken over");
            // SAFETY: still ours.
            unsafe { producer_deleter(t) };
        }
    }

    struct Producer {
        shape: [i64; 2],
        strides: [i64; 2],
        data: [f64; 6],
        deleted: Arc<AtomicUsize>,
    }

    unsafe extern "C" fn producer_deleter(t: *mut DLManagedTensorVersioned) {
        // SAFETY: made below with Box::into_raw, deleted once.
        unsafe {
            let t = Box::from_raw(t);
            let p = Box::from_raw(t.manager_ctx.cast::<Producer>());
            p.deleted.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn produce(
        deleted: &Arc<AtomicUsize>,
        version: u32,
        flags: u64,
    ) -> *mut DLManagedTensorVersioned {
        let mut p = Box::new(Producer {
            shape: [2, 3],
            strides: [1, 2],
            data: [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
            deleted: deleted.clone(),
        });
        let tensor = DLTensor {
            data: p.data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: device_type::CPU,
                device_id: 0,
            },
            ndim: 2,
            dtype: DLDataType::new(tc::FLOAT, 64),
            shape: p.shape.as_mut_ptr(),
            strides: p.strides.as_mut_ptr(),
            byte_offset: 8,
        };
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion {
                major: version,
                minor: 1,
            },
            manager_ctx: Box::into_raw(p).cast(),
            deleter: Some(producer_deleter),
            flags,
            dl_tensor: tensor,
        }))
    }

    #[test]
    fn a_dlpack_tensor_is_kept_alive_until_the_last_view_and_export_go() {
        let deleted = Arc::new(AtomicUsize::new(0));
        let t = produce(&deleted, 1, DLPACK_FLAG_BITMASK_READ_ONLY);
        // SAFETY: a fresh tensor handed over.
        let v = unsafe { StridedMemoryView::from_dlpack_versioned(t) }.unwrap();
        assert_eq!(v.shape(), &[2, 3]);
        assert_eq!(v.strides(), &[1, 2]);
        assert_eq!(v.format(), "<f8");
        assert!(v.readonly() && v.is_f_contiguous());
        // SAFETY: ptr is data + byte_offset (element 1 of the producer's data).
        assert_eq!(unsafe { *(v.ptr() as *const f64) }, 1.0);
        let export = v.to_dlpack_versioned(0);
        drop(v);
        assert_eq!(
            deleted.load(Ordering::SeqCst),
            0,
            "the export keeps the producer alive"
        );
        // SAFETY: our own export, consumed once.
        let again = unsafe { StridedMemoryView::from_dlpack_versioned(export) }.unwrap();
        assert_eq!(again.shape(), &[2, 3]);
        assert!(again.readonly());
        drop(again);
        assert_eq!(deleted.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_refused_tensor_stays_with_the_caller() {
        let deleted = Arc::new(AtomicUsize::new(0));
        let t = produce(&deleted, 2, 0);
        // SAFETY: a fresh tensor; on error it stays ours.
        let err = unsafe { StridedMemoryView::from_dlpack_versioned(t) }.unwrap_err();
        assert!(matches!(err, Error::Unsupported(_)), "{err}");
        assert_eq!(deleted.load(Ordering::SeqCst), 0);
        // SAFETY: still ours: delete it.
        unsafe { producer_deleter(t) };
        assert_eq!(deleted.load(Ordering::SeqCst), 1);
        // SAFETY: NULL is refused before any read.
        assert!(unsafe { StridedMemoryView::from_dlpack_versioned(std::ptr::null_mut()) }.is_err());
    }

    #[test]
    fn a_legacy_export_round_trips() {
        let owner_dropped = Arc::new(AtomicUsize::new(0));
        struct Flag(Arc<AtomicUsize>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let v = StridedMemoryView::new(
            f32_parts(vec![4], None),
            Some(ViewOwner::new(Flag(owner_dropped.clone()))),
        )
        .unwrap();
        let legacy = v.to_dlpack();
        drop(v);
        // SAFETY: our own export, consumed once.
        let back = unsafe { StridedMemoryView::from_dlpack(legacy) }.unwrap();
        assert_eq!((back.shape(), back.ptr()), (&[4i64][..], 0x1000));
        assert_eq!(owner_dropped.load(Ordering::SeqCst), 0);
        drop(back);
        assert_eq!(owner_dropped.load(Ordering::SeqCst), 1);
    }
}
