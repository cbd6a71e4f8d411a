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
