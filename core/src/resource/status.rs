//! Status codes and error details as they cross the C ABI (`RMM_OK`, `RMM_ERROR_*`, [`rmm_error`]),
//! and the mapping between them and [`Error`] in both directions.
//!
//! Errors cross as a status (`RMM_OK` or an `RMM_ERROR_*` kind) plus an optional [`rmm_error`]
//! out-parameter with the details.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, CStr};

use crate::error::Error;

/// Writes the status constants and [`STATUS_CODES`] from one row per status (`rmm_status` in
/// `rmm_c.h`, compared with this list by `bindings-cpp/src/header_check.rs`).
macro_rules! status_codes {
    ($($(#[$doc:meta])* $name:ident = $code:literal,)*) => {
        $($(#[$doc])* pub const $name: c_int = $code;)*

        /// Every status, `RMM_OK` first: its C name and code.
        pub const STATUS_CODES: &[(&CStr, c_int)] = &[$((
            match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                Ok(name) => name,
                Err(_) => panic!("a status name has no interior NUL"),
            },
            $code,
        )),*];
    };
}

status_codes! {
    /// Success.
    RMM_OK = 0,
    /// The resource could not provide the memory ([`Error::OutOfMemory`]).
    RMM_ERROR_OUT_OF_MEMORY = 1,
    /// A CUDA call failed ([`Error::Cuda`]); `cuda_code` holds the `CUresult`.
    RMM_ERROR_CUDA = 2,
    /// An argument was invalid, including NULL out-pointers and invalid handles ([`Error::InvalidArgument`]).
    RMM_ERROR_INVALID_ARGUMENT = 3,
    /// No CUDA driver ([`Error::NoDriver`]).
    RMM_ERROR_NO_DRIVER = 4,
    /// No (such) CUDA device ([`Error::NoDevice`]).
    RMM_ERROR_NO_DEVICE = 5,
    /// Not supported ([`Error::Unsupported`]).
    RMM_ERROR_UNSUPPORTED = 6,
    /// An internal failure: a Rust panic (or, from a C++ resource, an unexpected exception) was caught.
    RMM_ERROR_PANIC = 7,
}

/// The C name of `status`, e.g. `"RMM_ERROR_OUT_OF_MEMORY"`; `"RMM_ERROR_UNKNOWN"` for a code that
/// is no status.
pub fn status_name(status: c_int) -> &'static CStr {
    STATUS_CODES
        .iter()
        .find(|&&(_, code)| code == status)
        .map_or(c"RMM_ERROR_UNKNOWN", |&(name, _)| name)
}

/// Capacity of [`rmm_error::message`], NUL included.
pub const RMM_ERROR_MESSAGE_SIZE: usize = 512;

/// Details of a failed call (`rmm_error` in C). Every error out-parameter may be NULL.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rmm_error {
    /// `RMM_OK` or an `RMM_ERROR_*` kind (the same value the call returns).
    pub kind: i32,
    /// The `CUresult` for `RMM_ERROR_CUDA`, else 0.
    pub cuda_code: i32,
    /// The requested size for `RMM_ERROR_OUT_OF_MEMORY`, else 0.
    pub bytes: u64,
    /// The error's full message, UTF-8, NUL-terminated, truncated to fit.
    pub message: [c_char; RMM_ERROR_MESSAGE_SIZE],
}

impl rmm_error {
    /// A cleared error (`RMM_OK`, empty message).
    pub const fn new() -> Self {
        Self {
            kind: RMM_OK,
            cuda_code: 0,
            bytes: 0,
            message: [0; RMM_ERROR_MESSAGE_SIZE],
        }
    }

    /// The message as a string (up to the first NUL; invalid UTF-8 replaced).
    pub fn message(&self) -> String {
        let bytes: Vec<u8> = self
            .message
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Fills `self` from `error`.
    pub fn set(&mut self, error: &Error) {
        self.kind = error_kind(error);
        self.cuda_code = match error {
            Error::Cuda { code, .. } => *code,
            _ => 0,
        };
        self.bytes = match error {
            Error::OutOfMemory { bytes, .. } => *bytes as u64,
            _ => 0,
        };
        self.set_message(&error.to_string());
    }

    /// Sets the message, truncated on a character boundary to fit (NUL included).
    pub fn set_message(&mut self, text: &str) {
        let mut end = text.len().min(RMM_ERROR_MESSAGE_SIZE - 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        for (dst, &src) in self.message.iter_mut().zip(&text.as_bytes()[..end]) {
            *dst = src as c_char;
        }
        self.message[end] = 0;
    }

    /// Clears `self` to `RMM_OK` with an empty message.
    pub fn clear(&mut self) {
        self.kind = RMM_OK;
        self.cuda_code = 0;
        self.bytes = 0;
        self.message[0] = 0;
    }
}

impl Default for rmm_error {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for rmm_error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("rmm_error")
            .field("kind", &self.kind)
            .field("cuda_code", &self.cuda_code)
            .field("bytes", &self.bytes)
            .field("message", &self.message())
            .finish()
    }
}

/// The `RMM_ERROR_*` kind of `error`.
pub fn error_kind(error: &Error) -> c_int {
    match error {
        Error::OutOfMemory { .. } => RMM_ERROR_OUT_OF_MEMORY,
        Error::Cuda { .. } => RMM_ERROR_CUDA,
        Error::InvalidArgument(_) => RMM_ERROR_INVALID_ARGUMENT,
        Error::NoDriver(_) => RMM_ERROR_NO_DRIVER,
        Error::NoDevice(_) => RMM_ERROR_NO_DEVICE,
        Error::Unsupported(_) => RMM_ERROR_UNSUPPORTED,
    }
}

/// Rebuilds an [`Error`] from a failed call's `status` and details.
///
/// `resource` names the callee (for out-of-memory and internal errors), `call` the vtable entry or
/// function that failed (for CUDA errors). Messages written by rmm-core round-trip without the
/// variant's prefix being repeated. [`RMM_ERROR_PANIC`] and unknown kinds become
/// [`Error::Unsupported`] saying that the callee failed internally (`Error` has no internal variant).
pub fn error_from_c(
    status: c_int,
    details: &rmm_error,
    resource: &str,
    call: &'static str,
) -> Error {
    let message = details.message();
    let strip = |prefix: &str| -> String {
        let rest = message.strip_prefix(prefix).unwrap_or(&message);
        if rest.is_empty() {
            format!("{resource}: {call} failed without a message")
        } else {
            rest.to_owned()
        }
    };
    match status {
        RMM_ERROR_OUT_OF_MEMORY => {
            // An rmm error that crossed as is comes back as it was (its resource and detail).
            if let Some(same) = parse_out_of_memory(&message, details.bytes) {
                return same;
            }
            let plain = Error::out_of_memory(details.bytes as usize, resource);
            let detail = if message.is_empty() || message == plain.to_string() {
                String::new()
            } else {
                message
            };
            Error::OutOfMemory {
                bytes: details.bytes as usize,
                resource: resource.to_owned(),
                detail,
            }
        }
        RMM_ERROR_CUDA => {
            let code = details.cuda_code;
            // rmm-core writes "CUDA error {code} ({name}) in {call}: {message}".
            let parsed = message
                .strip_prefix(&format!("CUDA error {code} ("))
                .and_then(|rest| rest.split_once(") in "))
                .and_then(|(name, rest)| {
                    rest.split_once(": ").map(|(orig, msg)| (name, orig, msg))
                });
            match parsed {
                // A driver entry point's name: the error comes back as it was.
                Some((name, orig, msg)) if is_entry_point_name(orig) => Error::Cuda {
                    code,
                    name: name.to_owned(),
                    message: msg.to_owned(),
                    // SAFETY: `intern` returns a NUL-terminated copy that lives for the process.
                    call: unsafe { std::ffi::CStr::from_ptr(super::handle::intern(orig)) }
                        .to_str()
                        .unwrap_or(call),
                },
                Some((name, orig, msg)) => Error::Cuda {
                    code,
                    name: name.to_owned(),
                    message: format!("{msg} (in {orig})"),
                    call,
                },
                None => Error::Cuda {
                    code,
                    name: format!("CUresult {code}"),
                    message,
                    call,
                },
            }
        }
        RMM_ERROR_INVALID_ARGUMENT => Error::InvalidArgument(strip("invalid argument: ")),
        RMM_ERROR_NO_DRIVER => Error::NoDriver(strip("no CUDA driver: ")),
        RMM_ERROR_NO_DEVICE => Error::NoDevice(strip("no CUDA device: ")),
        RMM_ERROR_UNSUPPORTED => Error::Unsupported(strip("unsupported: ")),
        other => Error::Unsupported(format!(
            "{resource} failed internally in {call} (status {other}): {}",
            if message.is_empty() {
                "no message"
            } else {
                &message
            }
        )),
    }
}

/// An `rmm_error` out-parameter for the calls on the allocation path: only its header and the first
/// byte of its message are written before the call, as the C++ headers do (`c_resource.hpp`), where
/// zeroing the 512-byte message on every allocation and free would cost about a quarter of a call
/// through a handle. Read it with [`ErrorOut::read`] after a failed call.
pub struct ErrorOut(std::mem::MaybeUninit<rmm_error>);

impl ErrorOut {
    /// A slot whose header says `RMM_OK` and whose message is empty.
    #[inline]
    pub fn new() -> Self {
        let mut slot = std::mem::MaybeUninit::<rmm_error>::uninit();
        let p = slot.as_mut_ptr();
        // SAFETY: field pointers into the slot; plain writes, nothing read.
        unsafe {
            std::ptr::addr_of_mut!((*p).kind).write(RMM_OK);
            std::ptr::addr_of_mut!((*p).cuda_code).write(0);
            std::ptr::addr_of_mut!((*p).bytes).write(0);
            std::ptr::addr_of_mut!((*p).message)
                .cast::<c_char>()
                .write(0);
        }
        Self(slot)
    }

    /// The pointer to pass as a call's `err`.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut rmm_error {
        self.0.as_mut_ptr()
    }

    /// What the call reported: the header, and the message up to its NUL.
    ///
    /// # Safety
    /// The callee kept `rmm_c.h`'s contract: it left the message as it was, or wrote a
    /// NUL-terminated one that fits (a message of its own, read up to the NUL only).
    pub unsafe fn read(&self) -> rmm_error {
        let p = self.0.as_ptr();
        let mut out = rmm_error::new();
        // SAFETY: the header was written by `new` or by the callee; the message's bytes up to its
        // NUL were written by one of them (caller contract), and nothing past the NUL is read.
        unsafe {
            out.kind = std::ptr::addr_of!((*p).kind).read();
            out.cuda_code = std::ptr::addr_of!((*p).cuda_code).read();
            out.bytes = std::ptr::addr_of!((*p).bytes).read();
            let message = std::ptr::addr_of!((*p).message).cast::<c_char>();
            for i in 0..RMM_ERROR_MESSAGE_SIZE - 1 {
                let c = message.add(i).read();
                if c == 0 {
                    break;
                }
                out.message[i] = c;
            }
        }
        out
    }
}

impl Default for ErrorOut {
    fn default() -> Self {
        Self::new()
    }
}

/// The [`Error::OutOfMemory`] whose text is `message` (its `Display`, as [`rmm_error::set`] writes
/// it) for `bytes` bytes, or `None` when `message` is anything else (or was cut short).
fn parse_out_of_memory(message: &str, bytes: u64) -> Option<Error> {
    let rest = message.strip_prefix("out of memory: ")?;
    let (resource, rest) = rest.split_once(" could not allocate ")?;
    let (count, rest) = rest.split_once(" bytes")?;
    if count.parse::<u64>().ok()? != bytes {
        return None;
    }
    let detail = match rest {
        "" => String::new(),
        _ => rest.strip_prefix(" (")?.strip_suffix(')')?.to_owned(),
    };
    Some(Error::OutOfMemory {
        bytes: usize::try_from(bytes).ok()?,
        resource: resource.to_owned(),
        detail,
    })
}

/// True for what a CUDA driver entry point may be called (`cuMemAlloc_v2`): kept as an error's
/// `call` for the rest of the process, so anything else stays in the message.
fn is_entry_point_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with("cu")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
