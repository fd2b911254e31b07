//! Listening sockets. Both programs listen on the IPv6 wildcard by default (`[::]`) with
//! `IPV6_V6ONLY` off, whatever the node's `net.ipv6.bindv6only` says, so one socket takes IPv4
//! and IPv6 connections: the same install serves IPv4, IPv6 single-stack and dual-stack clusters
//! (kube-apiserver calls a pod at whichever address family the Service's endpoints have). A
//! kernel without IPv6 (`ipv6.disable=1`) cannot make that socket; the program then listens on
//! the IPv4 wildcard on the same port and says so in its log. Any other address is bound as
//! given.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};

/// Pending connections the kernel queues before `accept` (the kernel clamps it to
/// `net.core.somaxconn`).
const BACKLOG: i32 = 1024;

/// A non-blocking listener on `addr`, dual-stack when `addr` is `[::]:port` (module docs).
pub fn bind(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    if addr.is_ipv6() && addr.ip().is_unspecified() {
        match listen(addr, false) {
            Ok(listener) => return Ok(listener),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => return Err(e),
            Err(e) => {
                let v4 = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), addr.port());
                let listener = listen(v4, true)?;
                tracing::warn!(%addr, fallback = %v4, error = %e,
                    "cannot listen on the IPv6 wildcard (no IPv6 in this kernel?); listening on IPv4 only");
                return Ok(listener);
            }
        }
    }
    listen(addr, true)
}

fn listen(addr: SocketAddr, only_v6: bool) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(only_v6)?;
    }
    // A restarted process rebinds at once, past connections still in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{Ipv6Addr, TcpStream};

    use super::*;

    /// A byte sent from `to` arrives at the listener.
    fn reaches(listener: &std::net::TcpListener, to: SocketAddr) -> bool {
        let Ok(mut client) = TcpStream::connect(to) else {
            return false;
        };
        listener.set_nonblocking(false).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"x").unwrap();
        let mut byte = [0u8; 1];
        server.read_exact(&mut byte).unwrap();
        byte == *b"x"
    }

    #[test]
    fn the_ipv6_wildcard_takes_ipv4_and_ipv6_connections() {
        let listener = bind("[::]:0".parse().unwrap()).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(reaches(
            &listener,
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port)
        ));
        // Only where the machine has IPv6 loopback (the fallback covers kernels without IPv6).
        if listener.local_addr().unwrap().is_ipv6() {
            assert!(reaches(
                &listener,
                SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port)
            ));
        }
    }

    #[test]
    fn an_ipv4_address_is_bound_as_given() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        assert!(addr.is_ipv4() && addr.ip().is_loopback());
        assert!(reaches(&listener, addr));
    }

    #[test]
    fn a_port_in_use_is_an_error_not_a_fallback() {
        let first = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let taken = first.local_addr().unwrap();
        assert!(bind(taken).is_err());
    }
}
