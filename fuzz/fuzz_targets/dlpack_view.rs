//! DLPack tensors made from bytes, imported as strided views (core's parser, which the C entry
//! points and the bindings use): every tensor is either refused with a typed error and left to its
//! producer (its deleter not run), or becomes a view that describes memory sensibly (its address
//! is `data + byte_offset` without wrapping, its bytes lie in the address space, its device exists,
//! no stride is `INT64_MIN`), survives an export and re-import unchanged, and runs the producer's
//! deleter exactly once when the last view goes. The data is never read.
#![no_main]

use std::sync::atomic::{AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;
use rmm_core::view::dlpack::{DLPackVersion, DLPACK_FLAG_BITMASK_READ_ONLY};
use rmm_core::view::{DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLTensor, StridedMemoryView};
use rmm_core::Error;

/// Deleters run (the producer's count).
static DELETED: AtomicUsize = AtomicUsize::new(0);

/// The producer's arrays, freed by its deleter.
struct Arrays {
    shape: Vec<i64>,
    strides: Vec<i64>,
}

unsafe extern "C" fn delete_versioned(t: *mut DLManagedTensorVersioned) {
    // SAFETY: made below with Box::into_raw, deleted once.
    unsafe {
        let t = Box::from_raw(t);
        drop(Box::from_raw(t.manager_ctx.cast::<Arrays>()));
    }
    DELETED.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_legacy(t: *mut DLManagedTensor) {
    // SAFETY: as above.
    unsafe {
        let t = Box::from_raw(t);
        drop(Box::from_raw(t.manager_ctx.cast::<Arrays>()));
    }
    DELETED.fetch_add(1, Ordering::SeqCst);
}

/// Reads the input a few bytes at a time (zeros past its end).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    /// Mostly small numbers, sometimes any 64 bits.
    fn i64(&mut self) -> i64 {
        let tag = self.u8();
        match tag % 4 {
            0 => i64::from_le_bytes(self.take::<8>()),
            1 => -i64::from(self.u8() % 8),
            _ => i64::from(self.u8() % 16),
        }
    }
}

fn check_view(v: &StridedMemoryView, data: usize, offset: u64) {
    assert_eq!(v.ptr() as u128, data as u128 + u128::from(offset), "data + byte_offset, never wrapped");
    assert!(v.strides().iter().chain(v.byte_strides()).all(|&s| s != i64::MIN));
    assert!(v.device().device_id >= 0);
    if !v.is_empty() {
        assert_ne!(v.ptr(), 0, "elements at NULL");
        let (lo, hi) = v.byte_extent();
        assert!(v.ptr() as i128 + lo as i128 >= 0 && v.ptr() as i128 + hi as i128 <= usize::MAX as i128 + 1);
    }
    // An export and its re-import describe the same memory.
    let export = v.to_dlpack_versioned(0);
    // SAFETY: our own export, consumed once.
    let again = unsafe { StridedMemoryView::from_dlpack_versioned(export) }.expect("an export re-imports");
    assert_eq!((again.ptr(), again.shape(), again.strides()), (v.ptr(), v.shape(), v.strides()));
    assert_eq!((again.dtype(), again.device(), again.readonly()), (v.dtype(), v.device(), v.readonly()));
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let legacy = b.u8() % 4 == 0;
    let ndim = match b.u8() {
        n @ 0..=200 => i32::from(n % 8),
        n => i32::from(n) - 190, // up to 65, or past the limit of 64
    } * if b.u8() == 0xFF { -1 } else { 1 };
    let n = usize::try_from(ndim).unwrap_or(0).min(80);
    let arrays = Box::new(Arrays {
        shape: (0..n).map(|_| b.i64()).collect(),
        strides: (0..n).map(|_| b.i64()).collect(),
    });
    let null_strides = b.u8() % 3 == 0;
    let host = [0u8; 64];
    let data_ptr = match b.u8() % 5 {
        0 => 0,
        1 => host.as_ptr() as usize,
        2 => usize::MAX - usize::from(b.u8()),
        3 => usize::from_le_bytes(b.take::<8>()),
        _ => 0x1000 * usize::from(b.u8()),
    };
    let byte_offset = match b.u8() % 3 {
        0 => 0,
        1 => u64::from(b.u8()),
        _ => u64::from_le_bytes(b.take::<8>()),
    };
    let [code, bits, lanes_lo, lanes_hi] = b.take::<4>();
    let dtype = DLDataType { code: code % 20, bits, lanes: u16::from_le_bytes([lanes_lo, lanes_hi]) % 3 };
    let device = DLDevice { device_type: i32::from(b.u8() % 20), device_id: i32::from(b.u8() as i8) };
    let flags = u64::from(b.u8() % 8);
    let major = if b.u8() % 8 == 0 { 2 } else { 1 };

    let ctx = Box::into_raw(arrays);
    // SAFETY: `ctx` is alive until a deleter frees it.
    let (shape, strides) = unsafe { ((*ctx).shape.as_mut_ptr(), (*ctx).strides.as_mut_ptr()) };
    let dl_tensor = DLTensor {
        data: data_ptr as *mut std::ffi::c_void,
        device,
        ndim,
        dtype,
        shape: if n == 0 && ndim != 0 { std::ptr::null_mut() } else { shape },
        strides: if null_strides { std::ptr::null_mut() } else { strides },
        byte_offset,
    };
    let before = DELETED.load(Ordering::SeqCst);
    let result = if legacy {
        let t = Box::into_raw(Box::new(DLManagedTensor { dl_tensor, manager_ctx: ctx.cast(), deleter: Some(delete_legacy) }));
        // SAFETY: a live tensor; on error it stays ours.
        let r = unsafe { StridedMemoryView::from_dlpack(t) };
        (r, Box::new(move || unsafe { delete_legacy(t) }) as Box<dyn FnOnce()>)
    } else {
        let t = Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major, minor: 1 },
            manager_ctx: ctx.cast(),
            deleter: Some(delete_versioned),
            flags,
            dl_tensor,
        }));
        // SAFETY: as above.
        let r = unsafe { StridedMemoryView::from_dlpack_versioned(t) };
        (r, Box::new(move || unsafe { delete_versioned(t) }) as Box<dyn FnOnce()>)
    };
    match result {
        (Ok(view), _) => {
            assert!(!legacy || !view.readonly());
            assert!(legacy || view.readonly() == (flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0));
            check_view(&view, data_ptr, byte_offset);
            assert_eq!(DELETED.load(Ordering::SeqCst), before, "alive while a view is");
            drop(view);
            assert_eq!(DELETED.load(Ordering::SeqCst), before + 1, "deleted once with the last view");
        }
        (Err(e), delete) => {
            assert!(matches!(e, Error::InvalidArgument(_) | Error::Unsupported(_)), "{e}");
            assert_eq!(DELETED.load(Ordering::SeqCst), before, "a refused tensor is not taken over");
            delete();
        }
    }
});
