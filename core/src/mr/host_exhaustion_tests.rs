//! Host memory exhaustion (issue 30): allocating 256 bytes at a time until the host has no memory
//! left ends in an out-of-memory error, never an abort, and everything allocated can be freed.
//!
//! Each resource runs in a child process (this test executable, re-run on this one test) whose
//! address space is capped with `setrlimit(RLIMIT_AS)` a few MiB above what it holds once the
//! resource has reserved its memory: the bookkeeping that grows with the live allocations (the
//! checked-free index of the sub-allocators, the adaptors' records) then runs out first. An abort
//! kills the child with SIGABRT, which the parent reports.
//!
//! The frees run under the same cap, except for the fixed-size engine (fixed-size and binning):
//! its free list records each free block in a hash map (`mr/detail/fixed_list.rs`), so freeing
//! tens of thousands of blocks needs host memory that the cap does not leave (under the cap the
//! frees abort there); those children lift the cap after the out-of-memory error (an open item of
//! docs/design/checked-frees.md).

use crate::cuda::Stream;
use crate::mr::{
    ArenaMemoryResource, ArenaOptions, BinningMemoryResource, FixedSizeMemoryResource,
    LimitingResourceAdaptor, PoolMemoryResource, StatisticsResourceAdaptor, SystemMemoryResource,
    TrackingResourceAdaptor,
};
use crate::{AnyResource, MemoryResource};

const MIB: usize = 1 << 20;
/// What each resource reserves up front, before the cap.
const RESERVED: usize = 128 * MIB;
/// The address space the child may still map after the cap.
const HEADROOM: usize = 4 * MIB;
const CHILD: &str = "RMM_HOST_EXHAUSTION_CHILD";
/// Kinds whose frees need host memory per freed block (see the module documentation).
const FREES_NEED_MEMORY: [&str; 2] = ["binning", "fixed_size"];
const KINDS: [&str; 7] = [
    "pool",
    "binning",
    "fixed_size",
    "arena",
    "statistics",
    "limiting",
    "tracking",
];

fn pool() -> PoolMemoryResource {
    let system = AnyResource::new(SystemMemoryResource::new());
    PoolMemoryResource::new(system, Some(RESERVED), Some(RESERVED)).unwrap()
}

fn resource(kind: &str) -> AnyResource {
    let pool = || AnyResource::new(pool());
    match kind {
        "pool" => pool(),
        "binning" => {
            AnyResource::new(BinningMemoryResource::with_exponents(pool(), 8, 12).unwrap())
        }
        "fixed_size" => AnyResource::new(FixedSizeMemoryResource::new(pool(), 256, 1024).unwrap()),
        "arena" => AnyResource::new(
            ArenaMemoryResource::with_options(
                AnyResource::new(SystemMemoryResource::new()),
                ArenaOptions::default().arena_size(RESERVED),
            )
            .unwrap(),
        ),
        "statistics" => AnyResource::new(StatisticsResourceAdaptor::new(pool())),
        "limiting" => AnyResource::new(LimitingResourceAdaptor::new(pool(), RESERVED)),
        "tracking" => AnyResource::new(TrackingResourceAdaptor::new(pool(), false)),
        other => panic!("no resource {other}"),
    }
}

/// The bytes of address space the process maps now (`/proc/self/statm`).
fn mapped_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: sysconf has no memory effects.
    pages * usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap()
}

/// Sets the soft limit of the address space; returns the old limits.
fn cap_address_space(bytes: usize) -> libc::rlimit {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut old) }, 0);
    let cap = libc::rlimit {
        rlim_cur: bytes as libc::rlim_t,
        rlim_max: old.rlim_max,
    };
    // SAFETY: a valid limit (lowering the soft limit needs no privilege).
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) }, 0);
    old
}

/// The child: allocate 256 bytes until the first error, check it, free everything.
fn child(kind: &str) {
    let mr = resource(kind);
    // Room for more pointers than the resource can hold, made before the cap.
    let mut held: Vec<*mut u8> = Vec::with_capacity(RESERVED / 256 + 1);
    let old = cap_address_space(mapped_bytes() + HEADROOM);
    let error = loop {
        if held.len() == held.capacity() {
            break None;
        }
        match mr.allocate(Stream::DEFAULT, 256, 256) {
            Ok(p) => held.push(p),
            Err(e) => break Some(e),
        }
    };
    let n = held.len();
    if FREES_NEED_MEMORY.contains(&kind) {
        // SAFETY: restores the limits read above.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &old) };
    }
    for p in held.drain(..) {
        // SAFETY: each was allocated above with these arguments and is freed once.
        unsafe { mr.deallocate(Stream::DEFAULT, p, 256, 256) }
            .unwrap_or_else(|e| panic!("{kind}: freeing after the failure: {e}"));
    }
    // After everything went back, allocating works again.
    let again = mr.allocate(Stream::DEFAULT, 256, 256).unwrap();
    // SAFETY: just allocated.
    unsafe { mr.deallocate(Stream::DEFAULT, again, 256, 256).unwrap() };
    // SAFETY: restores the limits read above.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &old) };
    let error = error.unwrap_or_else(|| panic!("{kind}: {n} allocations and no error"));
    assert!(error.is_out_of_memory(), "{kind}: {error}");
    println!(
        "rmm-host-exhaustion {kind}: out of memory after {n} allocations ({error}); all freed"
    );
}

#[test]
fn allocating_until_the_host_is_exhausted_is_out_of_memory_not_an_abort() {
    if let Ok(kind) = std::env::var(CHILD) {
        return child(&kind);
    }
    let test = concat!(
        module_path!(),
        "::allocating_until_the_host_is_exhausted_is_out_of_memory_not_an_abort"
    );
    let test = test.split_once("::").unwrap().1;
    let children: Vec<_> = KINDS
        .iter()
        .map(|kind| {
            // One malloc arena and a fixed mmap threshold: glibc otherwise serves the tables from
            // per-thread heaps reserved 64 MiB at a time, which the cap already counts.
            let env = [
                (CHILD, *kind),
                ("MALLOC_ARENA_MAX", "1"),
                ("MALLOC_MMAP_THRESHOLD_", "131072"),
            ];
            let child = crate::testing::rerun_test(test, &env)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (kind, child)
        })
        .collect();
    for (kind, child) in children {
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{kind}: the child failed ({:?}; SIGABRT is signal 6):\n{text}",
            out.status
        );
        let line = format!("rmm-host-exhaustion {kind}: out of memory after");
        assert!(text.contains(&line), "{kind}:\n{text}");
        let report = text.lines().find_map(|l| l.find(&line).map(|at| &l[at..]));
        println!("{}", report.unwrap_or_default());
    }
}
