//! Owning containers of stream-ordered memory: RMM's `device_buffer`, `device_uvector<T>` and
//! `device_scalar<T>`.
//!
//! - [`DeviceBuffer`]: untyped bytes with a size and a capacity;
//! - [`DeviceVector<T>`]: uninitialized elements of a plain-data type `T` over a [`DeviceBuffer`];
//! - [`DeviceScalar<T>`]: one such element.
//!
//! Rules all three keep:
//! - **Ownership.** A container owns its allocation and a clone of the [`AnyResource`] it came from,
//!   so the resource lives at least as long as the memory (no "keep the resource alive" rule).
//! - **Streams.** Allocation, device-side work (fills, deep copies, growth) and the final free are
//!   ordered on the container's stream, which [`DeviceBuffer::set_stream`] changes (as do `resize`,
//!   `reserve` and `shrink_to_fit`, which take a stream, as in RMM). Work on other streams must be
//!   synchronized with it by the caller, exactly as in RMM.
//! - **Host copies.** Every copy between a container and a Rust slice synchronizes the stream before
//!   returning, so the borrow of the slice really covers the copy.
//! - **Devices.** A container remembers the device that was current when it was made and frees (and
//!   reallocates) there, whatever device is current at the time.
//! - **Host mode** (no driver or no device): containers over host-accessible resources such as
//!   [`crate::mr::SystemMemoryResource`] work, and every copy is a `memcpy`. Copies out of memory that
//!   is not host-accessible fail with [`Error::NoDriver`] / [`Error::NoDevice`].
//!
//! [`AnyResource`]: crate::AnyResource

mod device_buffer;
mod device_scalar;
mod device_vector;

pub use device_buffer::{DeviceBuffer, RawParts};
pub use device_scalar::DeviceScalar;
pub use device_vector::DeviceVector;

use crate::cuda::{self, Stream};
use crate::error::{Error, Result};
use crate::resource::{AnyResource, MemoryResource};

/// Checks that memory from `mr` can be read and written by the copy routines: always true with a
/// GPU (the driver copies any unified address), only for host-accessible memory in host mode.
pub(crate) fn ensure_copyable(mr: &AnyResource) -> Result<()> {
    if mr.access().host() || !cuda::is_host_mode() {
        return Ok(());
    }
    let why = format!(
        "{} memory is not host-accessible and there is no GPU to copy it with",
        mr.name()
    );
    Err(match cuda::driver() {
        Err(Error::NoDriver(msg)) => Error::NoDriver(format!("{why} ({msg})")),
        _ => Error::NoDevice(why),
    })
}

/// The most `memset`s [`store_async`] issues before it falls back to a synchronous copy.
const MAX_MEMSET_RUNS: usize = 8;

/// Writes `value` to `dst`, ordered on `stream`, without reading `value` after returning.
///
/// A value is a handful of bytes: it is written as one `memset` per run of equal bytes, whose byte
/// travels by value, so the write stays asynchronous and nothing borrowed can dangle. A value with
/// more than [`MAX_MEMSET_RUNS`] runs is copied and the stream synchronized instead.
///
/// # Safety
/// `dst` must be writable for `value.len()` bytes until the work queued on `stream` has completed.
pub(crate) unsafe fn store_async(dst: *mut u8, value: &[u8], stream: Stream) -> Result<()> {
    let runs = 1 + value.windows(2).filter(|w| w[0] != w[1]).count();
    if runs > MAX_MEMSET_RUNS {
        // SAFETY: caller contract for `dst`; `value` is a live slice and copy_sync waits for the copy.
        return unsafe { cuda::copy_sync(dst, value.as_ptr(), value.len(), stream) };
    }
    let mut start = 0;
    while let Some(&byte) = value.get(start) {
        let end = value[start..]
            .iter()
            .position(|&b| b != byte)
            .map_or(value.len(), |n| start + n);
        // SAFETY: `start..end` lies inside the `value.len()` bytes the caller made writable at `dst`.
        unsafe { cuda::set_async(dst.add(start), byte, end - start, stream)? };
        start = end;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testutil {
    //! A resource that records every allocation, for asserting that containers free what they take.

    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use crate::cuda::Stream;
    use crate::error::Result;
    use crate::mr::SystemMemoryResource;
    use crate::resource::{Access, AnyResource, MemoryResource};

    /// What the counting resource saw.
    #[derive(Default, Debug)]
    pub(crate) struct Ledger {
        /// Live allocations: address -> (bytes, alignment).
        pub live: HashMap<usize, (usize, usize)>,
        pub allocations: usize,
        pub deallocations: usize,
        /// Deallocations whose pointer, size or alignment did not match an allocation.
        pub mismatches: Vec<String>,
        /// The stream of the last deallocation.
        pub last_free_stream: Option<Stream>,
    }

    /// Host memory from the system resource, with a ledger of every call.
    pub(crate) struct Counting {
        sys: SystemMemoryResource,
        access: Access,
        pub ledger: Mutex<Ledger>,
    }

    impl Counting {
        /// A counting resource and an owning handle to it.
        pub(crate) fn new() -> (Arc<Counting>, AnyResource) {
            Self::with_access(Access::HOST)
        }

        /// One that claims `access` (its memory is host memory all the same).
        pub(crate) fn with_access(access: Access) -> (Arc<Counting>, AnyResource) {
            let c = Arc::new(Counting {
                sys: SystemMemoryResource::new(),
                access,
                ledger: Mutex::new(Ledger::default()),
            });
            (c.clone(), AnyResource::from_arc(c))
        }

        pub(crate) fn live(&self) -> usize {
            self.ledger
                .lock()
                .map(|l| l.live.len())
                .unwrap_or(usize::MAX)
        }

        /// Panics (test code) unless everything allocated was freed with matching arguments.
        pub(crate) fn assert_balanced(&self) {
            let l = self.ledger.lock().unwrap();
            assert!(
                l.mismatches.is_empty(),
                "mismatched frees: {:?}",
                l.mismatches
            );
            assert!(l.live.is_empty(), "leaked: {:?}", l.live);
            assert_eq!(l.allocations, l.deallocations);
        }
    }

    impl MemoryResource for Counting {
        fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
            // The stream is only recorded: tests pass fake handles that must never reach CUDA.
            let _ = stream;
            let p = self.sys.allocate(Stream::DEFAULT, bytes, alignment)?;
            let mut l = self.ledger.lock().unwrap();
            l.allocations += 1;
            l.live.insert(p as usize, (bytes, alignment));
            Ok(p)
        }

        unsafe fn deallocate(
            &self,
            stream: Stream,
            ptr: *mut u8,
            bytes: usize,
            alignment: usize,
        ) -> Result<()> {
            {
                let mut l = self.ledger.lock().unwrap();
                l.deallocations += 1;
                l.last_free_stream = Some(stream);
                match l.live.remove(&(ptr as usize)) {
                    Some(seen) if seen == (bytes, alignment) => {}
                    Some(seen) => l.mismatches.push(format!(
                        "{ptr:?}: allocated {seen:?}, freed ({bytes}, {alignment})"
                    )),
                    None => l.mismatches.push(format!("{ptr:?}: never allocated")),
                }
            }
            // SAFETY: forwarded; every pointer we hand out comes from `self.sys`. The recorded
            // stream may be a fake handle, so the host memory is freed in default-stream order.
            unsafe { self.sys.deallocate(Stream::DEFAULT, ptr, bytes, alignment) }
        }

        fn access(&self) -> Access {
            self.access
        }

        fn name(&self) -> &str {
            "counting_test_resource"
        }

        fn is_equal(&self, other: &dyn MemoryResource) -> bool {
            std::ptr::eq(
                self as *const Self as *const u8,
                other as *const dyn MemoryResource as *const u8,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_async_writes_every_byte_pattern() {
        if !cuda::is_host_mode() {
            return; // the GPU tests cover the device path
        }
        let patterns: [&[u8]; 5] = [
            &[],
            &[7],
            &[0, 0, 0, 0],
            &[1, 2, 2, 3, 3, 3, 4, 5],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], // > 8 runs: the copy path
        ];
        for pattern in patterns {
            let mut dst = vec![0xeeu8; pattern.len() + 1];
            // SAFETY: dst has room for the pattern; host mode writes synchronously.
            unsafe { store_async(dst.as_mut_ptr(), pattern, Stream::DEFAULT).unwrap() };
            assert_eq!(&dst[..pattern.len()], pattern);
            assert_eq!(dst[pattern.len()], 0xee, "wrote past the value");
        }
    }
}

#[cfg(test)]
mod current_resource_tests {
    use super::*;
    use crate::cuda::Stream;
    use crate::registry;
    use crate::testing::Probe;
    use crate::Access;

    #[test]
    fn containers_default_to_the_current_device_resource() {
        let _lock = registry::process_registry_test_lock();
        let previous = registry::set_current_resource(crate::AnyResource::new(Probe::new(
            Access::HOST_DEVICE,
        )))
        .unwrap();
        let current = registry::current_resource().unwrap();
        let live = || {
            current
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(std::sync::atomic::Ordering::SeqCst)
        };
        {
            let buf = DeviceBuffer::with_current_resource(100, Stream::DEFAULT).unwrap();
            assert!(
                buf.memory_resource().ptr_eq(&current),
                "the buffer shares the current resource"
            );
            let vec = DeviceVector::<u32>::with_current_resource(10, Stream::DEFAULT).unwrap();
            assert!(vec.memory_resource().ptr_eq(&current));
            let mut scalar = DeviceScalar::<f64>::with_current_resource(Stream::DEFAULT).unwrap();
            scalar.set_value(&2.5).unwrap();
            assert_eq!(scalar.value().unwrap(), 2.5);
            assert_eq!(live(), 3);
        }
        assert_eq!(live(), 0, "every container freed its memory");
        registry::set_current_resource(previous).unwrap();
    }
}
