//! Listening TCP sockets from `/proc/net/tcp` and `/proc/net/tcp6`, and the socket inodes
//! a process holds (`/proc/<pid>/fd/*` links read `socket:[inode]`). Pure parsers; the
//! reading is in `process`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// TCP_LISTEN in the kernel's numbering, as `/proc/net/tcp` prints it (`st` column).
const TCP_LISTEN: &str = "0A";

/// One listening socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub addr: IpAddr,
    pub port: u16,
    /// The socket's inode: the link target `socket:[inode]` of the owner's descriptor.
    pub inode: u64,
}

/// The listening sockets of one `/proc/net/tcp` or `tcp6` text. Lines that do not parse
/// (the header, a line cut short by a concurrent change) are skipped: the table is a
/// snapshot the kernel writes while sockets come and go.
pub fn parse_net_tcp(text: &str) -> Vec<Listener> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Listener> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 10 || f[3] != TCP_LISTEN {
        return None;
    }
    let (addr_hex, port_hex) = f[1].split_once(':')?;
    Some(Listener {
        addr: parse_addr(addr_hex)?,
        port: u16::from_str_radix(port_hex, 16).ok()?,
        inode: f[9].parse().ok()?,
    })
}

/// The kernel prints an address as 32-bit words in the machine's own byte order (one word
/// for IPv4, four for IPv6), each as 8 hex digits.
fn parse_addr(hex: &str) -> Option<IpAddr> {
    let word = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::to_ne_bytes);
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(hex)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(hex.get(i * 8..i * 8 + 8)?)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

/// The inode of a descriptor link that names a socket (`socket:[123456]`).
pub fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Whether a listener serves `addr:port`. A wildcard listener (0.0.0.0 or ::) serves every
/// address of the host; an IPv6 wildcard also takes IPv4 unless the socket is v6-only,
/// which the table does not say, so it counts.
pub fn serves(l: &Listener, addr: Option<IpAddr>, port: u16) -> bool {
    if l.port != port {
        return false;
    }
    match addr {
        None => true,
        Some(a) => l.addr == a || l.addr.is_unspecified() || as_v4(l.addr) == Some(a),
    }
}

/// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as IPv4.
fn as_v4(a: IpAddr) -> Option<IpAddr> {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
        IpAddr::V4(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A little-endian machine's table: broker 1 on 127.0.0.11:9092 and :9091, a wildcard
    // listener on 8080, and an established connection (01) that must be ignored.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0B00007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 40211 1 0000000000000000 100 0 0 10 0
   1: 0B00007F:2383 00000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 40207 1 0000000000000000 100 0 0 10 0
   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   3: 0100007F:D2F0 0B00007F:2384 01 00000000:00000000 00:00000000 00000000     0        0 52133 1 0000000000000000 20 4 30 10 -1
   4: 0B00007F:2385 00000000:0000 0A
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:2384 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 77 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 78 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000B00007F:2386 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 79 1 0000000000000000 100 0 0 10 0
";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn ipv4_listeners_only() {
        let l = parse_net_tcp(TCP);
        assert_eq!(
            l,
            vec![
                Listener {
                    addr: ip("127.0.0.11"),
                    port: 9092,
                    inode: 40211
                },
                Listener {
                    addr: ip("127.0.0.11"),
                    port: 9091,
                    inode: 40207
                },
                Listener {
                    addr: ip("0.0.0.0"),
                    port: 8080,
                    inode: 1001
                },
            ],
            "the established connection and the cut line are skipped"
        );
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn ipv6_listeners() {
        let l = parse_net_tcp(TCP6);
        assert_eq!(l.len(), 3);
        assert_eq!((l[0].addr, l[0].port, l[0].inode), (ip("::"), 9092, 77));
        assert_eq!((l[1].addr, l[1].port), (ip("::1"), 8081));
        assert_eq!(l[2].addr, ip("::ffff:127.0.0.11"));
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn which_listener_serves_an_address() {
        let l = parse_net_tcp(TCP);
        let six = parse_net_tcp(TCP6);
        // Another broker on the same port at another address does not count.
        assert!(serves(&l[0], Some(ip("127.0.0.11")), 9092));
        assert!(!serves(&l[0], Some(ip("127.0.0.12")), 9092));
        assert!(!serves(&l[0], Some(ip("127.0.0.11")), 9093));
        assert!(
            serves(&l[0], None, 9092),
            "no address: any listener on the port"
        );
        assert!(serves(&l[2], Some(ip("10.1.2.3")), 8080), "wildcard");
        assert!(serves(&six[0], Some(ip("127.0.0.12")), 9092), "v6 wildcard");
        assert!(serves(&six[2], Some(ip("127.0.0.11")), 9094), "v4-mapped");
    }

    #[test]
    fn garbage_is_skipped() {
        assert!(parse_net_tcp("").is_empty());
        assert!(parse_net_tcp("0: XYZ:2384 0 0A a b c d e f").is_empty());
        assert!(parse_net_tcp("0: 0100007F:GGGG 0 0A a b c d e 5").is_empty());
        assert!(parse_net_tcp("0: 0100007F00:2384 0 0A a b c d e 5").is_empty());
        assert!(parse_net_tcp("0: 0100007F:2384 0 0A a b c d e inode").is_empty());
    }

    #[test]
    fn socket_links() {
        assert_eq!(socket_inode("socket:[40211]"), Some(40211));
        assert_eq!(socket_inode("pipe:[40211]"), None);
        assert_eq!(socket_inode("/var/lib/kafka/00000.log"), None);
        assert_eq!(socket_inode("socket:[]"), None);
        assert_eq!(socket_inode("socket:[12"), None);
    }
}
