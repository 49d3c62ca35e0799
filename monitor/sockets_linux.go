package monitor

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/procfs"
)

// ReadSockets dumps the TCP sockets of the caller's network namespace
// with their tcp_info (sock_diag) and the inodes of its UDP sockets.
func ReadSockets() (*Sockets, error) {
	s := &Sockets{tcp: map[uint32]SocketCounters{}, udp: map[uint32]bool{}}
	if sockDiag.Result() != nil {
		s.procIO = true // the fallback: /proc/PID/io for every socket holder
		return s, nil
	}
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		infos, err := netlink.SocketDiagTCPInfo(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, fmt.Errorf("sock_diag tcp: %w", err)
		}
		for _, r := range infos {
			if r.InetDiagMsg == nil || r.InetDiagMsg.INode == 0 || r.TCPInfo == nil {
				continue
			}
			ti := r.TCPInfo
			s.tcp[r.InetDiagMsg.INode] = SocketCounters{
				Events: uint64(ti.Data_segs_in) + uint64(ti.Data_segs_out),
				Bytes:  ti.Bytes_acked + ti.Bytes_received,
				Sent:   ti.Bytes_acked,
			}
		}
		if s.anyOther {
			continue
		}
		udp, err := netlink.SocketDiagUDP(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			// No udp_diag: a socket that is not one of the TCP
			// sockets counts as UDP (through /proc/PID/io).
			s.anyOther = true
			continue
		}
		for _, u := range udp {
			if u.INode != 0 {
				s.udp[u.INode] = true
			}
		}
	}
	return s, nil
}

// Process sums pid's socket counters: for its TCP sockets the data
// segments and bytes their tcp_info counts; if it holds a UDP socket, its
// read and write calls and bytes (/proc/PID/io, which count its file I/O
// too, and sends by write(2), not sendto(2): UDP sockets keep no such
// counters). ErrGone when it exited.
func (s *Sockets) Process(pid int) (SocketCounters, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return SocketCounters{}, ErrGone
	}
	var c SocketCounters
	udp := false
	for _, fd := range fds {
		link, err := os.Readlink(dir + fd.Name())
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 32)
		if err != nil {
			continue
		}
		if t, ok := s.tcp[uint32(ino)]; ok {
			c.Events += t.Events
			c.Bytes += t.Bytes
			c.Sent += t.Sent
			c.Sockets++
		} else if s.udp[uint32(ino)] || s.procIO || s.anyOther {
			udp = true
			c.Sockets++
		}
	}
	if udp {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
		if err != nil {
			return c, ErrGone
		}
		io := procfs.ParseIO(b)
		c.Events += io.SysCR + io.SysCW
		c.Bytes += io.RChar + io.WChar
		c.Sent += io.WChar
	}
	return c, nil
}

// sockDiag probes whether the kernel answers sock_diag dumps of TCP
// sockets with their tcp_info (inet_diag, tcp_diag).
var sockDiag = features.Probe{Name: "sock_diag tcp_info", Fn: func() error {
	if _, err := netlink.SocketDiagTCPInfo(unix.AF_INET); err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return fmt.Errorf("%w: sock_diag dump of TCP sockets: %v", features.ErrNotSupported, err)
	}
	return nil
}}

// SocketsMechanism says how ReadSockets counts a process's traffic, for
// lanes doctor.
func SocketsMechanism() features.Mechanism {
	m := features.Mechanism{Resource: "boost: who communicates", OK: true}
	if err := sockDiag.Result(); err != nil {
		m.Backend = "/proc/PID/io of processes holding a socket"
		m.Reason = "no sock_diag (inet_diag) here: read and write calls and bytes, file I/O included: " + err.Error()
		return m
	}
	m.Backend, m.Preferred = "sock_diag tcp_info per TCP socket; /proc/PID/io for UDP", true
	m.Reason = "data segments and bytes of each process's TCP sockets, read every 100 ms in a contact"
	if _, err := netlink.SocketDiagUDP(unix.AF_INET); err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		m.Reason += "; no sock_diag for UDP (udp_diag: " + err.Error() + "): /proc/PID/io for every other socket"
	}
	return m
}
