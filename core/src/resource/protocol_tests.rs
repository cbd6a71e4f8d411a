use std::sync::atomic::Ordering;

use super::foreign::check_handle;
use super::handle::*;
use super::status::*;
use super::*;
use crate::error::Error;
use crate::registry::owner::serve::*;
use crate::registry::owner::{find_loaded_owner, OwnerTable};
use crate::testing::c_resource::*;
use crate::testing::Probe;

fn probe(access: Access) -> AnyResource {
    AnyResource::new(Probe::new(access))
}

// --- layout -------------------------------------------------------------------------------------

#[test]
fn layouts_match_rmm_c_h() {
    use std::mem::{align_of, offset_of, size_of};
    assert_eq!(size_of::<rmm_error>(), 4 + 4 + 8 + 512);
    assert_eq!(offset_of!(rmm_error, bytes), 8);
    assert_eq!(offset_of!(rmm_error, message), 16);
    assert_eq!(size_of::<rmm_resource>(), 2 * size_of::<usize>());
    assert_eq!(
        size_of::<rmm_resource_vtable>(),
        8 + 10 * size_of::<usize>()
    );
    assert_eq!(offset_of!(rmm_resource_vtable, owner), 8);
    assert_eq!(offset_of!(rmm_resource_vtable, retain), 16);
    assert_eq!(
        offset_of!(rmm_resource_vtable, is_equal),
        8 + 9 * size_of::<usize>()
    );
    assert_eq!(align_of::<rmm_resource_vtable>(), align_of::<usize>());
    assert_eq!(offset_of!(RustVTable, c), 0, "the C part must come first");
}

#[test]
fn one_static_vtable_per_type_tagged_with_this_binary() {
    let a = AnyResource::new(crate::mr::SystemMemoryResource::new());
    let b = AnyResource::new(crate::mr::SystemMemoryResource::new());
    let h = a.borrow_handle();
    // SAFETY: a live handle's vtable.
    let v = unsafe { &*h.vtable };
    assert_eq!(v.abi_version, RMM_ABI_VERSION);
    assert_eq!(v.size as usize, std::mem::size_of::<rmm_resource_vtable>());
    assert_eq!(v.owner, owner_tag());
    assert_eq!(h.vtable, b.borrow_handle().vtable);
    assert_ne!(h.vtable, probe(Access::HOST).borrow_handle().vtable);
    // SAFETY: h is live.
    unsafe { check_handle(&h).unwrap() };
}

#[test]
fn foreign_handle_is_wrapped_used_and_released_on_drop() {
    let (h, seen) = c_resource(RMM_OK);
    // SAFETY: an owning handle with a complete vtable.
    let any = unsafe { AnyResource::try_from_handle(h) }.unwrap();
    assert!(
        any.downcast_ref::<ForeignResource>().is_some(),
        "not ours: wrapped"
    );
    assert_eq!(any.name(), "c_resource");
    assert_eq!(any.access(), Access::HOST_DEVICE);
    assert_eq!(
        c_refs(h),
        1,
        "wrapping took over the reference, it did not add one"
    );
    let p = any.allocate(Stream::DEFAULT, 100, 64).unwrap();
    assert_eq!(p as usize % 64, 0);
    // SAFETY: from `any` with these arguments.
    unsafe { any.deallocate(Stream::DEFAULT, p, 100, 64).unwrap() };
    let q = any.allocate_sync(10, 8).unwrap();
    // SAFETY: as above.
    unsafe { any.deallocate_sync(q, 10, 8).unwrap() };
    assert_eq!(seen.allocations.load(Ordering::SeqCst), 2);
    assert_eq!(seen.deallocations.load(Ordering::SeqCst), 2);
    let clone = any.clone();
    drop(any);
    assert!(
        !seen.released.load(Ordering::SeqCst),
        "a clone still holds it"
    );
    drop(clone);
    assert!(
        seen.released.load(Ordering::SeqCst),
        "the last Rust owner released the C resource"
    );
}

#[test]
fn re_exporting_a_foreign_resource_gives_back_the_original_handle() {
    let (h, seen) = c_resource(RMM_OK);
    // SAFETY: owning, complete.
    let any = unsafe { AnyResource::from_handle(h) };
    let again = any.to_handle();
    assert_eq!(again, h, "no Rust wrapper around the C resource");
    assert_eq!(c_refs(h), 2);
    assert_eq!(any.borrow_handle(), h);
    // Coming back once more is a new wrapper of the same C object, equal to the first.
    // SAFETY: owning.
    let other = unsafe { AnyResource::from_handle(again) };
    assert_eq!(any, other);
    drop((any, other));
    assert!(seen.released.load(Ordering::SeqCst));
}

#[test]
fn foreign_errors_come_back_as_values() {
    for (kind, check) in [
        (
            RMM_ERROR_OUT_OF_MEMORY,
            (|e: &Error| matches!(e, Error::OutOfMemory { bytes: 4096, .. })) as fn(&Error) -> bool,
        ),
        (
            RMM_ERROR_INVALID_ARGUMENT,
            |e| matches!(e, Error::InvalidArgument(m) if m == "the C resource says no"),
        ),
        (RMM_ERROR_UNSUPPORTED, |e| {
            matches!(e, Error::Unsupported(_))
        }),
        (
            RMM_ERROR_PANIC,
            |e| matches!(e, Error::Unsupported(m) if m.contains("failed internally")),
        ),
    ] {
        let (h, seen) = c_resource(kind);
        // SAFETY: owning, complete.
        let any = unsafe { AnyResource::from_handle(h) };
        let err = any.allocate(Stream::DEFAULT, 4096, 256).unwrap_err();
        assert!(check(&err), "kind {kind}: {err:?}");
        assert!(
            err.to_string().contains("c_resource") || err.to_string().contains("says no"),
            "{err}"
        );
        drop(any);
        assert!(seen.released.load(Ordering::SeqCst));
    }
}

#[test]
fn incomplete_or_foreign_version_vtables_are_rejected() {
    static BAD_VERSION: rmm_resource_vtable = rmm_resource_vtable {
        abi_version: 99,
        ..c_vtable(std::ptr::null())
    };
    static MISSING: rmm_resource_vtable = rmm_resource_vtable {
        allocate: None,
        ..c_vtable(std::ptr::null())
    };
    static SHORT: rmm_resource_vtable = rmm_resource_vtable {
        size: 16,
        ..c_vtable(std::ptr::null())
    };
    for (vtable, needle) in [
        (&BAD_VERSION, "ABI version 99"),
        (&MISSING, "NULL function"),
        (&SHORT, "16 bytes"),
    ] {
        let h = rmm_resource {
            self_: std::ptr::null_mut(),
            vtable,
        };
        // SAFETY: the vtables are complete in memory; only their contents are wrong.
        let err = unsafe { AnyResource::try_from_handle(h) }.unwrap_err();
        assert!(err.to_string().contains(needle), "{err}");
        let mut e = rmm_error::new();
        // SAFETY: as above; nothing is retained for a rejected handle.
        let status = unsafe { rmm_set_per_device_resource(0, h, std::ptr::null_mut(), &mut e) };
        assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
        assert!(e.message().contains(needle), "{e:?}");
    }
}

#[test]
fn every_error_variant_has_its_kind_and_round_trips() {
    let cases = [
        (Error::out_of_memory(12, "x"), RMM_ERROR_OUT_OF_MEMORY),
        (
            Error::OutOfMemory {
                bytes: 4096,
                resource: "pool_memory_resource".into(),
                detail: "maximum pool size exceeded".into(),
            },
            RMM_ERROR_OUT_OF_MEMORY,
        ),
        (
            Error::Cuda {
                code: 2,
                name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
                message: "oom".into(),
                call: "cuMemAlloc",
            },
            RMM_ERROR_CUDA,
        ),
        (Error::invalid("bad"), RMM_ERROR_INVALID_ARGUMENT),
        (Error::NoDriver("none".into()), RMM_ERROR_NO_DRIVER),
        (Error::NoDevice("none".into()), RMM_ERROR_NO_DEVICE),
        (Error::Unsupported("nope".into()), RMM_ERROR_UNSUPPORTED),
    ];
    for (error, kind) in cases {
        assert_eq!(error_kind(&error), kind);
        let mut details = rmm_error::new();
        details.set(&error);
        assert_eq!(details.kind, kind);
        assert_eq!(details.message(), error.to_string());
        // Whatever resource and call the receiver names, an rmm error comes back as it was.
        let back = error_from_c(kind, &details, "another_resource", "call");
        assert_eq!(back, error, "kind {kind}");
        assert_eq!(back.to_string(), error.to_string());
    }
    // A message of another shape keeps the receiver's names and carries the message along.
    let mut details = rmm_error::new();
    details.kind = RMM_ERROR_OUT_OF_MEMORY;
    details.bytes = 8;
    details.set_message("my alloc error");
    let back = error_from_c(RMM_ERROR_OUT_OF_MEMORY, &details, "callback", "allocate");
    assert_eq!(
        back.to_string(),
        "out of memory: callback could not allocate 8 bytes (my alloc error)"
    );
    let mut details = rmm_error::new();
    details.cuda_code = 2;
    details.set_message("CUDA error 2 (CUDA_ERROR_OUT_OF_MEMORY) in not a driver call!: oom");
    match error_from_c(RMM_ERROR_CUDA, &details, "x", "call") {
        Error::Cuda { call, message, .. } => assert_eq!(
            (call, message.as_str()),
            ("call", "oom (in not a driver call!)")
        ),
        other => panic!("{other}"),
    }
    let unknown = error_from_c(42, &rmm_error::new(), "thing", "call");
    assert!(
        matches!(&unknown, Error::Unsupported(m) if m.contains("thing") && m.contains("42")),
        "{unknown}"
    );
}

#[test]
fn an_error_out_slot_reads_what_the_callee_wrote() {
    let mut slot = ErrorOut::new();
    // SAFETY: nothing was written since `new`: its header and empty message.
    let untouched = unsafe { slot.read() };
    assert_eq!(
        (untouched.kind, untouched.message()),
        (RMM_OK, String::new())
    );
    // SAFETY: the slot's pointer; `set` writes the header and a NUL-terminated message, as a
    // callee does.
    unsafe { (*slot.as_mut_ptr()).set(&Error::out_of_memory(64, "pool")) };
    // SAFETY: as above.
    let read = unsafe { slot.read() };
    assert_eq!((read.kind, read.bytes), (RMM_ERROR_OUT_OF_MEMORY, 64));
    assert_eq!(
        read.message(),
        "out of memory: pool could not allocate 64 bytes"
    );
}

#[test]
fn long_messages_are_truncated_on_a_character_boundary() {
    let mut details = rmm_error::new();
    details.set(&Error::invalid("é".repeat(400)));
    let message = details.message();
    assert!(message.len() < RMM_ERROR_MESSAGE_SIZE);
    assert!(message.starts_with("invalid argument: éé"));
    assert!(!message.contains('\u{fffd}'), "no split character");
    assert!(details.message.contains(&0));
}

#[test]
fn no_owner_is_loaded_in_the_core_test_binary() {
    assert!(find_loaded_owner().is_none());
    assert!(OwnerTable::local().is_local());
    assert_eq!(rmm_abi_version(), RMM_ABI_VERSION);
    assert_eq!(rmm_abi_owner(), owner_tag());
}
