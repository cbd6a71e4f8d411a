//! The one error type of rmm-core.
//!
//! Every fallible operation returns [`Result<T>`]; nothing panics on bad input. Bindings map each
//! variant onto their language's exception: out-of-memory becomes Python's `MemoryError` and C++'s
//! `rmm::out_of_memory`, invalid arguments `ValueError` / `rmm::logic_error`, and so on.

/// Errors of every rmm operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The resource could not provide `bytes` bytes.
    #[error("out of memory: {resource} could not allocate {bytes} bytes{}", detail_suffix(.detail))]
    OutOfMemory {
        /// The number of bytes requested.
        bytes: usize,
        /// The name of the resource that failed.
        resource: String,
        /// Extra context (may be empty).
        detail: String,
    },
    /// A CUDA driver call failed with something other than out-of-memory.
    #[error("CUDA error {code} ({name}) in {call}: {message}")]
    Cuda {
        /// The numeric `CUresult`.
        code: i32,
        /// The symbolic name, e.g. `CUDA_ERROR_INVALID_VALUE`.
        name: String,
        /// The driver's description.
        message: String,
        /// The driver entry point that failed.
        call: &'static str,
    },
    /// An argument was out of its domain (alignment not a power of two, size overflow, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The CUDA driver library (libcuda) could not be loaded.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// The driver is present but there is no (such) CUDA device.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// The operation is not supported by this resource, device or driver.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

fn detail_suffix(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    }
}

impl Error {
    /// An [`Error::OutOfMemory`] for `bytes` requested from `resource`.
    pub fn out_of_memory(bytes: usize, resource: impl Into<String>) -> Self {
        Error::OutOfMemory {
            bytes,
            resource: resource.into(),
            detail: String::new(),
        }
    }

    /// An [`Error::InvalidArgument`] with the given message.
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    /// True for [`Error::OutOfMemory`]: the request may succeed later or elsewhere.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Error::OutOfMemory { .. })
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_memory_message_names_bytes_and_resource() {
        let e = Error::out_of_memory(1 << 50, "cuda_memory_resource");
        let text = e.to_string();
        assert!(text.contains("1125899906842624"), "{text}");
        assert!(text.contains("cuda_memory_resource"), "{text}");
        assert!(e.is_out_of_memory());
        assert!(!Error::invalid("x").is_out_of_memory());
    }

    #[test]
    fn cuda_error_message_has_code_name_and_call() {
        let e = Error::Cuda {
            code: 1,
            name: "CUDA_ERROR_INVALID_VALUE".into(),
            message: "invalid argument".into(),
            call: "cuMemAlloc",
        };
        assert_eq!(
            e.to_string(),
            "CUDA error 1 (CUDA_ERROR_INVALID_VALUE) in cuMemAlloc: invalid argument"
        );
    }
}
