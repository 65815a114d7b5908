//! [`WriteNow`]: write to a socket from a thread outside the runtime, at
//! once, without asking the runtime whether it is writable.
//!
//! A server whose handlers run on a worker pool has two threads per answer:
//! the worker that made it and the runtime thread that writes it. Waking the
//! runtime thread costs more than the `send` itself (an `eventfd` write, a
//! context switch, a park again). When the connection's task has nothing of
//! its own to write, it can lend its socket's write side to the workers
//! instead, and they `send` the answers themselves: a plain non-blocking
//! `send(2)` on the socket, the one syscall the write needed anyway.
//!
//! Only plain sockets can be written this way: a TLS stream's bytes must go
//! through its session, so its halves have no [`RawSocket`]. Writing around
//! the runtime is safe for the runtime: a write half's writability is a
//! hint, cleared by the next write that would block.
//!
//! # Safety
//!
//! A [`RawSocket`] is a bare file descriptor: whoever holds one must stop
//! using it before the half it came from is dropped (and the descriptor
//! closed, perhaps reused for another connection). [`RawSocket::send_now`]
//! is `unsafe` for that reason; the server's lender keeps it behind the same
//! lock that closes the loan, and closes it before the half drops.

use std::io;

/// `send(2)` flags: no `SIGPIPE` for a peer gone. Apple's systems have no
/// such flag (their sockets carry `SO_NOSIGPIPE` instead).
#[cfg(all(unix, not(target_vendor = "apple")))]
const NO_SIGNAL: libc::c_int = libc::MSG_NOSIGNAL;
#[cfg(target_vendor = "apple")]
const NO_SIGNAL: libc::c_int = 0;

/// The descriptor of a plain socket, borrowed from its write half; see the
/// module docs for the rule that makes using it sound.
#[derive(Clone, Copy, Debug)]
pub struct RawSocket {
    #[cfg(unix)]
    fd: std::os::fd::RawFd,
}

impl RawSocket {
    /// Writes what the socket takes now of `buf`: the count written, or
    /// [`WouldBlock`](io::ErrorKind::WouldBlock) when its send buffer is
    /// full. A peer gone is an error (`EPIPE`), not a `SIGPIPE`, whatever
    /// the process does with that signal (`MSG_NOSIGNAL`, where the
    /// platform has it; elsewhere, as for the runtime's own writes, the
    /// socket's options).
    ///
    /// # Safety
    ///
    /// The write half this came from must not have been dropped, and must
    /// not be dropped before this returns.
    #[cfg(unix)]
    pub unsafe fn send_now(self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: the caller keeps the descriptor open for this call.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
        // The socket is non-blocking (the runtime's).
        socket2::SockRef::from(&fd).send_with_flags(buf, NO_SIGNAL)
    }

    /// Reads what the socket holds now into `buf`: the count (`0` at the
    /// end of the stream), or [`WouldBlock`](io::ErrorKind::WouldBlock)
    /// when nothing is there. On `Ok(n)` the first `n` bytes of `buf` are
    /// initialized. For a worker that reads a connection's next request
    /// while the connection's task lends it the socket's read side.
    ///
    /// # Safety
    ///
    /// As for [`send_now`](Self::send_now); and nothing else may read the
    /// socket meanwhile.
    #[cfg(unix)]
    pub unsafe fn recv_now(self, buf: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
        // SAFETY: the caller keeps the descriptor open for this call.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
        socket2::SockRef::from(&fd).recv(buf)
    }

    /// Sets the socket's receive low-water mark (`SO_RCVLOWAT`) on Linux:
    /// TCP there does not wake a thread waiting for the socket to be
    /// readable (the runtime's `epoll_wait`) until that many bytes are
    /// buffered, while a non-blocking read still takes whatever is there,
    /// and setting it back signals the socket readable at once if bytes
    /// wait. For a connection whose reads a worker polls for a while, so
    /// that each request it takes costs no wake-up of the runtime thread as
    /// well. Elsewhere it does nothing: on BSD and macOS a read below the
    /// mark finds nothing, which would starve the worker.
    ///
    /// # Safety
    ///
    /// As for [`send_now`](Self::send_now).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub unsafe fn set_recv_lowat(self, bytes: usize) -> io::Result<()> {
        let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: a valid pointer to a `c_int` and its size, for the call;
        // the caller keeps the descriptor open.
        let r = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        match r {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Does nothing off Linux (see the Linux version).
    ///
    /// # Safety
    ///
    /// As on Linux.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub unsafe fn set_recv_lowat(self, _bytes: usize) -> io::Result<()> {
        Ok(())
    }

    /// Never reads on platforms without file descriptors.
    ///
    /// # Safety
    ///
    /// As on unix.
    #[cfg(not(unix))]
    pub unsafe fn recv_now(self, _buf: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Never writes on platforms without file descriptors.
    ///
    /// # Safety
    ///
    /// As on unix.
    #[cfg(not(unix))]
    pub unsafe fn send_now(self, _buf: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// A write half whose socket can be written from another thread
/// ([`RawSocket::send_now`]).
pub trait WriteNow {
    /// The socket, for a plain socket's half; `None` for a stream that must
    /// be written through its half (TLS).
    fn raw_socket(&self) -> Option<RawSocket>;
}

impl WriteNow for tokio::net::tcp::OwnedWriteHalf {
    #[cfg(unix)]
    fn raw_socket(&self) -> Option<RawSocket> {
        use std::os::fd::AsRawFd;
        Some(RawSocket {
            fd: self.as_ref().as_raw_fd(),
        })
    }

    #[cfg(not(unix))]
    fn raw_socket(&self) -> Option<RawSocket> {
        None
    }
}

#[cfg(unix)]
impl WriteNow for tokio::net::unix::OwnedWriteHalf {
    fn raw_socket(&self) -> Option<RawSocket> {
        use std::os::fd::AsRawFd;
        Some(RawSocket {
            fd: self.as_ref().as_raw_fd(),
        })
    }
}

/// The halves of `tokio::io::split` (TLS streams): never.
impl<T> WriteNow for tokio::io::WriteHalf<T> {
    fn raw_socket(&self) -> Option<RawSocket> {
        None
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// A client and the write half of its server side, on loopback.
    async fn pair() -> (tokio::net::TcpStream, tokio::net::tcp::OwnedWriteHalf) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        (client.unwrap(), server.unwrap().0.into_split().1)
    }

    #[tokio::test]
    async fn another_thread_writes_what_the_peer_reads() {
        let (mut client, write) = pair().await;
        let socket = write.raw_socket().expect("a plain socket has one");
        let sent = std::thread::spawn(move || {
            // SAFETY: `write` outlives the thread (joined below).
            unsafe { socket.send_now(b"pong") }
        })
        .join()
        .unwrap()
        .unwrap();
        assert_eq!(sent, 4);
        let mut got = [0u8; 4];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
        drop(write);
    }

    #[tokio::test]
    async fn a_full_send_buffer_would_block() {
        let (_client, write) = pair().await;
        let socket = write.raw_socket().unwrap();
        let chunk = vec![7u8; 1 << 16];
        let mut blocked = None;
        // The client never reads: the buffers fill within a few MiB.
        for _ in 0..10_000 {
            // SAFETY: `write` is alive.
            match unsafe { socket.send_now(&chunk) } {
                Ok(n) => assert!(n > 0),
                Err(e) => {
                    blocked = Some(e.kind());
                    break;
                }
            }
        }
        assert_eq!(blocked, Some(io::ErrorKind::WouldBlock));
    }

    /// A peer gone is an error, not a signal: with `SIGPIPE` at its default
    /// (which kills the process), as in a host that does not ignore it.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test]
    async fn a_peer_gone_is_an_error_not_a_sigpipe() {
        let (client, write) = pair().await;
        let socket = write.raw_socket().unwrap();
        drop(client);
        // SAFETY: setting a signal's disposition; restored below.
        let before = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        let mut failed = None;
        for _ in 0..1000 {
            // SAFETY: `write` is alive.
            match unsafe { socket.send_now(b"answer") } {
                Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
                Err(e) => {
                    failed = Some(e.kind());
                    break;
                }
            }
        }
        // SAFETY: as above.
        unsafe { libc::signal(libc::SIGPIPE, before) };
        assert!(
            matches!(
                failed,
                Some(io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset)
            ),
            "{failed:?}"
        );
    }

    #[tokio::test]
    async fn another_thread_reads_what_the_peer_sent() {
        use tokio::io::AsyncWriteExt;
        let (mut client, write) = pair().await;
        let socket = write.raw_socket().unwrap();
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8];
        // SAFETY: `write` is alive, and nothing else reads the socket.
        let nothing = unsafe { socket.recv_now(&mut buf) }.unwrap_err();
        assert_eq!(nothing.kind(), io::ErrorKind::WouldBlock);
        client.write_all(b"call").await.unwrap();
        let got = std::thread::spawn(move || {
            for _ in 0..1000 {
                // SAFETY: `write` outlives the thread (joined below).
                match unsafe { socket.recv_now(&mut buf) } {
                    // SAFETY: `recv_now` initialized the first `n` bytes.
                    Ok(n) => {
                        return buf[..n]
                            .iter()
                            .map(|b| unsafe { b.assume_init() })
                            .collect()
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
                }
            }
            Vec::new()
        })
        .join()
        .unwrap();
        assert_eq!(got, b"call");
        drop(client);
        drop(write);
    }

    #[tokio::test]
    async fn tls_halves_have_none() {
        let (a, _b) = tokio::io::duplex(64);
        let (_read, write) = tokio::io::split(a);
        assert!(write.raw_socket().is_none());
    }
}
