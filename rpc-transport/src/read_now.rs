//! [`ReadNow`]: read what a socket holds at this moment, without asking the
//! runtime whether it is readable.
//!
//! tokio reads a socket only after its I/O driver has seen it become
//! readable, and one runtime thread at a time polls that driver. A task that
//! keeps polling for its peer's next message (a connection's busy poll) on a
//! runtime with several threads would wait for the thread blocked in
//! `epoll_wait` to be woken, hear the socket and tell it: the wake-up the
//! poll exists to save. A plain non-blocking `recv` on the socket sees the
//! bytes the moment they land, whichever thread asks.
//!
//! Only plain sockets can be read this way: a TLS stream's bytes must go
//! through its session, so its halves say [`Unsupported`](std::io::ErrorKind::Unsupported).
//! Reading around the runtime is safe for the runtime: its readiness is a
//! hint, cleared by the next read that finds nothing. It is not free: the
//! bytes read so still raise their (edge-triggered) event, which wakes the
//! thread blocked in `epoll_wait` and costs its task one `recv` that finds
//! nothing.

use std::io;
use std::mem::MaybeUninit;

/// A read half that can be read at once, bypassing the runtime's readiness.
///
/// # Safety
///
/// On `Ok(n)`, [`read_now`](Self::read_now) must have initialized the first
/// `n` bytes of `buf`, and `n` must not exceed `buf.len()`: the reader takes
/// them as data without looking.
pub unsafe trait ReadNow {
    /// Reads what the socket holds now into `buf`: the count read (`0` at
    /// the end of the stream), [`WouldBlock`](io::ErrorKind::WouldBlock)
    /// when nothing is there, [`Unsupported`](io::ErrorKind::Unsupported)
    /// for a stream that cannot be read so. On `Ok(n)` the first `n` bytes
    /// of `buf` are initialized.
    fn read_now(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize>;

    /// Whether [`read_now`](Self::read_now) can ever read.
    fn can_read_now(&self) -> bool {
        true
    }
}

// SAFETY: `recv(2)` writes the bytes it reports, within the slice it was given.
unsafe impl ReadNow for tokio::net::tcp::OwnedReadHalf {
    fn read_now(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        socket2::SockRef::from(self.as_ref()).recv(buf)
    }
}

// SAFETY: as for TCP.
#[cfg(unix)]
unsafe impl ReadNow for tokio::net::unix::OwnedReadHalf {
    fn read_now(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        socket2::SockRef::from(self.as_ref()).recv(buf)
    }
}

/// The halves of `tokio::io::split` (TLS streams): never.
// SAFETY: never reports a byte.
unsafe impl<T> ReadNow for tokio::io::ReadHalf<T> {
    fn read_now(&self, _: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        Err(io::ErrorKind::Unsupported.into())
    }

    fn can_read_now(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn reads_what_arrived_and_says_would_block_when_nothing_did() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) =
            tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (mut client, (server, _)) = (client.unwrap(), server.unwrap());
        let (read, _write) = server.into_split();
        let mut buf = [MaybeUninit::<u8>::uninit(); 16];
        let nothing = read.read_now(&mut buf).unwrap_err();
        assert_eq!(nothing.kind(), io::ErrorKind::WouldBlock);

        client.write_all(b"ping").await.unwrap();
        let mut got = Vec::new();
        for _ in 0..1000 {
            match read.read_now(&mut buf) {
                Ok(n) => {
                    // SAFETY: `read_now` initialized the first `n` bytes.
                    got.extend(buf[..n].iter().map(|b| unsafe { b.assume_init() }));
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(got, b"ping");
        drop(client);
        let mut end = Ok(1);
        for _ in 0..1000 {
            end = read.read_now(&mut buf);
            if !matches!(&end, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert_eq!(end.unwrap(), 0, "the end of the stream reads as 0");
    }

    #[tokio::test]
    async fn split_halves_cannot() {
        let (a, _b) = tokio::io::duplex(64);
        let (read, _write) = tokio::io::split(a);
        assert!(!read.can_read_now());
        let mut buf = [MaybeUninit::<u8>::uninit(); 4];
        let e = read.read_now(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    }
}
