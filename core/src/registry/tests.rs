use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::testing::{require_gpu, skip, Probe};
use crate::MemoryResource;

fn probe(access: Access) -> AnyResource {
    AnyResource::new(Probe::new(access))
}

#[test]
fn host_mode_device_zero_defaults_to_system_memory() {
    let registry = LocalRegistry::with_layout(true, 1);
    assert!(registry.is_host_mode());
    let first = registry.get(0).unwrap();
    assert_eq!(first.name(), "system_memory_resource");
    assert!(first.access().host());
    // Lazily created once: every get returns the same resource object.
    assert!(registry.get(0).unwrap().ptr_eq(&first));
    assert!(first.ptr_eq(&registry.initial_resource()));
}

#[test]
fn host_mode_has_only_device_zero() {
    let registry = LocalRegistry::with_layout(true, 1);
    for device in [1, 7, -1] {
        let err = registry.get(device).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("host mode"), "{err}");
        assert!(registry.set(device, probe(Access::HOST)).is_err());
        assert!(registry.reset(device).is_err());
    }
}

#[test]
fn set_returns_the_previous_resource_and_get_sees_the_new_one() {
    let registry = LocalRegistry::with_layout(true, 1);
    let a = probe(Access::HOST);
    let b = probe(Access::HOST_DEVICE);
    let previous = registry.set(0, a.clone()).unwrap();
    assert!(
        previous.ptr_eq(&registry.initial_resource()),
        "an unset device's previous is the initial resource"
    );
    assert!(registry.get(0).unwrap().ptr_eq(&a));
    assert!(registry.set(0, b.clone()).unwrap().ptr_eq(&a));
    assert!(registry.get(0).unwrap().ptr_eq(&b));
    // The registry holds exactly one reference to what it stores.
    assert_eq!(b.owner_count(), 2);
    let back = registry.reset(0).unwrap();
    assert!(back.ptr_eq(&b));
    drop(back);
    assert_eq!(
        b.owner_count(),
        1,
        "reset gave the registry's reference back to the caller"
    );
    assert!(registry
        .get(0)
        .unwrap()
        .ptr_eq(&registry.initial_resource()));
}

#[test]
fn the_previous_resource_stays_alive_while_the_caller_holds_it() {
    let registry = LocalRegistry::with_layout(true, 1);
    let p = Probe::new(Access::HOST);
    let dropped = p.dropped.clone();
    registry.set(0, AnyResource::new(p)).unwrap();
    let previous = registry.reset(0).unwrap();
    assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
    let ptr = previous
        .allocate(crate::cuda::Stream::DEFAULT, 64, 8)
        .unwrap();
    // SAFETY: from `previous` with these arguments.
    unsafe {
        previous
            .deallocate(crate::cuda::Stream::DEFAULT, ptr, 64, 8)
            .unwrap()
    };
    drop(previous);
    assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
}

#[test]
fn reset_of_an_unset_device_returns_the_initial_resource() {
    let registry = LocalRegistry::with_layout(true, 1);
    assert!(registry
        .reset(0)
        .unwrap()
        .ptr_eq(&registry.initial_resource()));
}

#[test]
fn host_mode_rejects_a_resource_without_host_access() {
    let registry = LocalRegistry::with_layout(true, 1);
    let err = registry.set(0, probe(Access::DEVICE)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{text}");
    assert!(
        text.contains("probe") && text.contains("host-accessible") && text.contains("host mode"),
        "{text}"
    );
    assert_eq!(
        registry.get(0).unwrap().name(),
        "system_memory_resource",
        "a rejected set changes nothing"
    );
}

#[test]
fn gpu_layout_requires_device_access_and_valid_ids() {
    // The rules of GPU mode, checked without a GPU (nothing here allocates).
    let registry = LocalRegistry::with_layout(false, 2);
    assert_eq!(registry.get(1).unwrap().name(), "cuda_memory_resource");
    assert!(
        registry.get(0).unwrap().ptr_eq(&registry.get(1).unwrap()),
        "one shared initial resource"
    );
    let err = registry.set(1, probe(Access::HOST)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)));
    assert!(
        err.to_string()
            .contains("device-accessible memory is required"),
        "{err}"
    );
    assert!(registry.set(1, probe(Access::HOST_DEVICE)).is_ok());
    assert!(registry.set(0, probe(Access::DEVICE)).is_ok());
    let err = registry.get(2).unwrap_err();
    assert!(err.to_string().contains("2 device(s) present"), "{err}");
    assert!(registry.get(-1).is_err());
}

#[test]
fn devices_are_independent() {
    let registry = LocalRegistry::with_layout(false, 3);
    let a = probe(Access::DEVICE);
    registry.set(2, a.clone()).unwrap();
    assert!(registry.get(2).unwrap().ptr_eq(&a));
    assert_eq!(registry.get(0).unwrap().name(), "cuda_memory_resource");
    assert_eq!(registry.get(1).unwrap().name(), "cuda_memory_resource");
}

#[test]
fn concurrent_sets_hand_every_resource_back_exactly_once() {
    // Each set returns what was current just before it: over all threads, the previous resources
    // plus the final one are exactly the initial resource plus everything that was set.
    const THREADS: usize = 8;
    const PER_THREAD: usize = 200;
    let registry = Arc::new(LocalRegistry::with_layout(true, 1));
    let initial = registry.get(0).unwrap();
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let registry = registry.clone();
            std::thread::spawn(move || {
                let mut set = Vec::new();
                let mut previous = Vec::new();
                for _ in 0..PER_THREAD {
                    let r = probe(Access::HOST);
                    previous.push(registry.set(0, r.clone()).unwrap());
                    set.push(r);
                    // Readers in between always see some valid resource.
                    assert!(registry.get(0).unwrap().access().host());
                }
                (set, previous)
            })
        })
        .collect();
    let key = |r: &AnyResource| Arc::as_ptr(r.as_arc()) as *const () as usize;
    let mut counts: HashMap<usize, i32> = HashMap::new();
    *counts.entry(key(&initial)).or_default() += 1;
    let mut all_previous = Vec::new();
    for h in handles {
        let (set, previous) = h.join().unwrap();
        for r in &set {
            *counts.entry(key(r)).or_default() += 1;
        }
        all_previous.extend(previous);
    }
    for r in all_previous
        .iter()
        .chain(std::iter::once(&registry.get(0).unwrap()))
    {
        *counts.entry(key(r)).or_default() -= 1;
    }
    assert_eq!(all_previous.len(), THREADS * PER_THREAD);
    assert!(
        counts.values().all(|&c| c == 0),
        "a resource was lost or handed back twice"
    );
}

#[test]
fn process_registry_is_local_without_librmm_and_follows_the_current_device() {
    let _lock = process_registry_test_lock();
    assert!(
        !routes_to_owner(),
        "no librmm is loaded in the core test binary"
    );
    let mine = probe(Access::HOST_DEVICE);
    let previous = set_current_resource(mine.clone()).unwrap();
    assert!(current_resource().unwrap().ptr_eq(&mine));
    let device = current_device_or_host().unwrap();
    assert!(per_device_resource(device).unwrap().ptr_eq(&mine));
    assert!(reset_current_resource().unwrap().ptr_eq(&mine));
    // Put back whatever an earlier test left (normally the initial resource).
    let _ = set_current_resource(previous);
}

#[test]
fn process_registry_in_host_mode_defaults_to_system_memory() {
    if !cuda::is_host_mode() {
        skip(
            "process_registry_in_host_mode_defaults_to_system_memory",
            "a GPU is present",
        );
        return;
    }
    let _lock = process_registry_test_lock();
    reset_per_device_resource(0).unwrap();
    assert_eq!(current_resource().unwrap().name(), "system_memory_resource");
    assert!(matches!(
        per_device_resource(1),
        Err(Error::InvalidArgument(_))
    ));
    let mr = current_resource().unwrap();
    let p = mr.allocate(crate::cuda::Stream::DEFAULT, 16, 16).unwrap();
    // SAFETY: host memory of 16 bytes from `mr`.
    unsafe {
        std::ptr::write_bytes(p, 7, 16);
        assert_eq!(*p.add(15), 7);
        mr.deallocate(crate::cuda::Stream::DEFAULT, p, 16, 16)
            .unwrap();
    }
}

#[test]
fn owner_registry_over_the_c_abi_behaves_like_the_local_one() {
    let _lock = process_registry_test_lock();
    // Routing through this binary's own entry points exercises the client side of the ABI.
    // SAFETY: the local table is complete and always loaded.
    let remote = unsafe { OwnerRegistry::new(OwnerTable::local()) };
    let mine = probe(Access::HOST_DEVICE);
    let previous = remote.set(0, mine.clone()).unwrap();
    let got = remote.get(0).unwrap();
    assert!(
        got.ptr_eq(&mine),
        "our own resource comes back unwrapped, not wrapped"
    );
    assert!(
        per_device_resource(0).unwrap().ptr_eq(&mine),
        "it is the same registry"
    );
    assert!(remote.reset(0).unwrap().ptr_eq(&mine));
    let err = remote.get(99).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("device 99"), "{err}");
    let err = remote.set(0, probe(Access::NONE)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let _ = set_per_device_resource(0, previous);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_registry_defaults_to_cuda_and_rejects_host_only_resources() {
    require_gpu();
    let registry = LocalRegistry::new();
    assert!(!registry.is_host_mode());
    let device = cuda::current_device().unwrap();
    let initial = registry.get(device).unwrap();
    assert_eq!(initial.name(), "cuda_memory_resource");
    let p = initial
        .allocate(crate::cuda::Stream::DEFAULT, 1 << 20, 256)
        .unwrap();
    // SAFETY: from `initial` with these arguments.
    unsafe {
        initial
            .deallocate(crate::cuda::Stream::DEFAULT, p, 1 << 20, 256)
            .unwrap()
    };
    let err = registry.set(device, probe(Access::HOST)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("device-accessible"), "{err}");
    let count = cuda::device_count().unwrap();
    assert!(registry.get(count).is_err());
    assert!(registry
        .set(device, probe(Access::HOST_DEVICE))
        .unwrap()
        .ptr_eq(&initial));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_current_resource_is_per_device() {
    require_gpu();
    let _lock = process_registry_test_lock();
    let device = cuda::current_device().unwrap();
    let mine = probe(Access::DEVICE);
    let previous = set_current_resource(mine.clone()).unwrap();
    assert!(per_device_resource(device).unwrap().ptr_eq(&mine));
    if cuda::device_count().unwrap() > 1 {
        let other = (device + 1) % cuda::device_count().unwrap();
        assert!(!per_device_resource(other).unwrap().ptr_eq(&mine));
    }
    assert!(reset_current_resource().unwrap().ptr_eq(&mine));
    assert_eq!(current_resource().unwrap().name(), "cuda_memory_resource");
    let _ = set_current_resource(previous);
}

#[test]
fn the_generation_changes_on_every_set_and_reset_and_only_then() {
    let registry = LocalRegistry::with_layout(true, 1);
    let start = registry.generation().unwrap();
    assert_ne!(start, 0, "0 means unknown in the C ABI");
    registry.get(0).unwrap();
    assert_eq!(
        registry.generation(),
        Some(start),
        "a read (even the lazy first one) changes nothing"
    );
    registry.set(0, probe(Access::HOST)).unwrap();
    let after_set = registry.generation().unwrap();
    assert_ne!(after_set, start);
    registry.reset(0).unwrap();
    let after_reset = registry.generation().unwrap();
    assert_ne!(after_reset, after_set);
    // A refused set changes nothing.
    assert!(registry.set(0, probe(Access::DEVICE)).is_err());
    assert!(registry.set(3, probe(Access::HOST)).is_err());
    assert_eq!(registry.generation(), Some(after_reset));
}

#[test]
fn an_owner_without_a_generation_entry_point_reports_none() {
    // The local table exports nothing by name, like an older librmm without rmm_registry_generation.
    // SAFETY: this binary's own entry points, which live as long as the test.
    let routed = unsafe { OwnerRegistry::new(OwnerTable::local()) };
    assert_eq!(routed.generation(), None);
}
