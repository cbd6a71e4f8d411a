//! An [`ExportedSpan`] over a Unix socket: a fixed header, the fabric handles inline, and the file
//! descriptors as `SCM_RIGHTS` ancillary data (the only way a descriptor crosses processes), at most
//! [`FDS_PER_MESSAGE`] per message.
//!
//! The header: eight little-endian `u64`s: magic (`RMMVMM\0` + version 1), memory (0 host,
//! 1 device), handle kind (0 POSIX fd, 1 fabric), granularity, offset, size, number of handles, 0.
//! Then 64 bytes per fabric handle. The first chunk of descriptors rides on the header; each further
//! chunk on one byte `+`.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use super::backing::{MemoryKind, SharedHandle};
use super::share::ExportedSpan;
use crate::error::{Error, Result};

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"RMMVMM\0\x01");
const HEADER: usize = 64;
/// Descriptors per message: the kernel takes at most 253 (`SCM_MAX_FD`).
pub(crate) const FDS_PER_MESSAGE: usize = 250;
/// The most handles a received span may carry (a 64 TiB span of 2 MiB granules).
const MAX_HANDLES: u64 = 1 << 25;
const CHUNK_MARK: u8 = b'+';

fn io_error(what: &str, err: std::io::Error) -> Error {
    Error::invalid(format!("{what} over the Unix socket failed: {err}"))
}

impl ExportedSpan {
    /// Sends the span over a connected Unix socket: the descriptors travel as `SCM_RIGHTS`, so
    /// the receiving process gets its own descriptors of the same memory. The span keeps its own.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an inconsistent span or a failed send.
    pub fn send(&self, socket: &UnixStream) -> Result<()> {
        self.validate()?;
        let fabric = matches!(self.handles.first(), Some(SharedHandle::Fabric(_)));
        let mut message = Vec::with_capacity(HEADER);
        for word in [
            MAGIC,
            (self.memory == MemoryKind::Device) as u64,
            fabric as u64,
            self.granularity as u64,
            self.offset as u64,
            self.size as u64,
            self.handles.len() as u64,
            0,
        ] {
            message.extend_from_slice(&word.to_le_bytes());
        }
        let mut fds = Vec::new();
        for handle in &self.handles {
            match handle {
                SharedHandle::Fabric(data) => message.extend_from_slice(data),
                SharedHandle::PosixFd(fd) => fds.push(fd.as_raw_fd()),
            }
        }
        let mut chunks = fds.chunks(FDS_PER_MESSAGE);
        send_with_fds(socket, &message, chunks.next().unwrap_or(&[]))?;
        for chunk in chunks {
            send_with_fds(socket, &[CHUNK_MARK], chunk)?;
        }
        Ok(())
    }

    /// Receives a span sent by [`ExportedSpan::send`], checked ([`ExportedSpan::validate`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed message, descriptors lost on the way, a socket
    /// closed mid-message or a failed receive.
    pub fn receive(socket: &UnixStream) -> Result<ExportedSpan> {
        let mut fds = Vec::new();
        let mut header = [0u8; HEADER];
        receive_exact(socket, &mut header, &mut fds)?;
        let word = |i: usize| u64::from_le_bytes(header[i * 8..i * 8 + 8].try_into().unwrap());
        if word(0) != MAGIC {
            return Err(Error::invalid(
                "the message is not an exported span of this version (bad magic)",
            ));
        }
        let memory = match word(1) {
            0 => MemoryKind::Host,
            1 => MemoryKind::Device,
            other => return Err(Error::invalid(format!("unknown memory kind {other}"))),
        };
        let fabric = match word(2) {
            0 => false,
            1 => true,
            other => return Err(Error::invalid(format!("unknown handle kind {other}"))),
        };
        let count = word(6);
        if count > MAX_HANDLES {
            return Err(Error::invalid(format!(
                "an exported span of {count} handles is beyond the limit of {MAX_HANDLES}"
            )));
        }
        let count = count as usize;
        let handles = if fabric {
            let mut data = vec![0u8; count * 64];
            receive_exact(socket, &mut data, &mut fds)?;
            if !fds.is_empty() {
                return Err(Error::invalid(
                    "a span of fabric handles came with descriptors",
                ));
            }
            data.chunks_exact(64)
                .map(|c| SharedHandle::Fabric(c.try_into().unwrap()))
                .collect()
        } else {
            while fds.len() < count {
                let mut mark = [0u8; 1];
                receive_exact(socket, &mut mark, &mut fds)?;
                if mark[0] != CHUNK_MARK {
                    return Err(Error::invalid("a descriptor chunk without its mark"));
                }
            }
            if fds.len() != count {
                return Err(Error::invalid(format!(
                    "an exported span of {count} handles came with {} descriptors",
                    fds.len()
                )));
            }
            fds.into_iter().map(SharedHandle::PosixFd).collect()
        };
        let span = ExportedSpan {
            memory,
            granularity: word(3) as usize,
            offset: word(4) as usize,
            size: word(5) as usize,
            handles,
        };
        span.validate()?;
        Ok(span)
    }
}

/// Room for one message's `SCM_RIGHTS` control data, 8-byte aligned as `cmsghdr` needs.
fn control_buffer(fds: usize) -> Vec<u64> {
    // SAFETY: CMSG_SPACE only computes a size.
    let bytes = unsafe { libc::CMSG_SPACE((fds * size_of::<RawFd>()) as u32) } as usize;
    vec![0u64; bytes.div_ceil(8)]
}

/// Writes all of `data`, the first `sendmsg` carrying `fds`.
fn send_with_fds(socket: &UnixStream, data: &[u8], fds: &[RawFd]) -> Result<()> {
    let mut control = control_buffer(fds.len());
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; every field used is set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() * 8;
        // SAFETY: the control buffer holds CMSG_SPACE(fds) bytes, so the first header and its data
        // fit; CMSG_* only compute addresses inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                fds.len(),
            );
        }
    }
    let sent = loop {
        // SAFETY: `msg` points at live buffers for the duration of the call; the socket is open.
        let n = unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            break n as usize;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(io_error("sending an exported span", err));
        }
    };
    let mut rest = socket;
    rest.write_all(&data[sent..])
        .map_err(|e| io_error("sending an exported span", e))
}

/// Fills `buf` from the socket, adding every descriptor that arrives on the way to `fds`.
fn receive_exact(socket: &UnixStream, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let mut control = control_buffer(FDS_PER_MESSAGE + 3);
        let mut iov = libc::iovec {
            iov_base: buf[filled..].as_mut_ptr().cast(),
            iov_len: buf.len() - filled,
        };
        // SAFETY: msghdr is plain data; every field used is set below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() * 8;
        // SAFETY: `msg` points at live, writable buffers; the socket is open.
        let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io_error("receiving an exported span", err));
        }
        // SAFETY: the kernel filled `msg`'s control data; CMSG_* walk it within msg_controllen.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    let bytes = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                    for k in 0..bytes / size_of::<RawFd>() {
                        // Each received descriptor is new in this process and owned by us.
                        fds.push(OwnedFd::from_raw_fd(data.add(k).read_unaligned()));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(Error::invalid(
                "descriptors of an exported span were lost (control data truncated)",
            ));
        }
        if n == 0 {
            return Err(Error::invalid(
                "the socket closed in the middle of an exported span",
            ));
        }
        filled += n as usize;
    }
    Ok(())
}
