package intproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/intnw"
)

// sock_diag (linux/inet_diag.h): one socket by its addresses, and its
// cgroup v2 id (INET_DIAG_CGROUP_ID, Linux 5.7 and later).
const (
	sockDiagByFamily = 20
	inetDiagCgroupID = 21
	diagReqLen       = 56
	diagMsgLen       = 72
)

// SocketCgroup returns the id of the cgroup v2 group the TCP socket with
// local address local and peer peer was created in (its inode number), by
// asking the kernel (sock_diag) in the network namespace at nsPath ("":
// the caller's).
func SocketCgroup(nsPath string, local, peer netip.AddrPort) (uint64, error) {
	var cfg netlink.Config
	if nsPath != "" {
		f, err := os.Open(nsPath)
		if err != nil {
			return 0, fmt.Errorf("sock_diag: network namespace: %w", err)
		}
		defer f.Close()
		cfg.NetNS = int(f.Fd())
	}
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, &cfg)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: %w", err)
	}
	defer c.Close()
	req := make([]byte, diagReqLen)
	fam := byte(unix.AF_INET)
	if !local.Addr().Unmap().Is4() || !peer.Addr().Unmap().Is4() {
		fam = unix.AF_INET6
	}
	req[0], req[1] = fam, unix.IPPROTO_TCP
	binary.LittleEndian.PutUint32(req[4:], 0xffffffff) // every state
	binary.BigEndian.PutUint16(req[8:], local.Port())
	binary.BigEndian.PutUint16(req[10:], peer.Port())
	putAddr := func(b []byte, a netip.Addr) {
		if fam == unix.AF_INET {
			v := a.Unmap().As4()
			copy(b, v[:])
		} else {
			v := a.As16()
			copy(b, v[:])
		}
	}
	putAddr(req[12:28], local.Addr())
	putAddr(req[28:44], peer.Addr())
	binary.LittleEndian.PutUint32(req[48:], ^uint32(0)) // no cookie
	binary.LittleEndian.PutUint32(req[52:], ^uint32(0))
	msgs, err := c.Execute(netlink.Message{Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request}, Data: req})
	if err != nil {
		return 0, fmt.Errorf("sock_diag %v -> %v: %w", local, peer, err)
	}
	for _, m := range msgs {
		if len(m.Data) < diagMsgLen {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[diagMsgLen:])
		if err != nil {
			return 0, fmt.Errorf("sock_diag: %w", err)
		}
		for ad.Next() {
			if ad.Type() == inetDiagCgroupID {
				return ad.Uint64(), nil
			}
		}
		if err := ad.Err(); err != nil {
			return 0, fmt.Errorf("sock_diag: %w", err)
		}
		return 0, errors.New("sock_diag: the kernel tells no cgroup id (Linux 5.7 and later do)")
	}
	return 0, fmt.Errorf("sock_diag: no socket %v -> %v", local, peer)
}

// LaneLabeler labels a local connection from the lane of the process that
// opened it: the cgroup its socket was created in (SocketCgroup) is found
// among lanes' groups in the cgroup v2 hierarchy (lanes-<lane>, the
// groups of `lanes run`, and their systemd slices).
type LaneLabeler struct {
	// Labels maps a lane to its streams' label; a lane not in it, and a
	// process in no lane, gets Default.
	Labels  map[string]intnw.Label
	Default intnw.Label
	// V2Root is the cgroup v2 mount ("": found by cgroup.Detect).
	V2Root string
	// Namespace is the network namespace of the local connections (a
	// path such as /run/netns/NAME); "": the caller's.
	Namespace string
	// Logf tells why a connection got the default.
	Logf func(format string, args ...any)

	mu    sync.Mutex
	byID  map[uint64]string // cgroup id -> lane
	found bool
}

// Label is the Labeler of l.
func (l *LaneLabeler) Label(c net.Conn, peerDst netip.AddrPort) (string, intnw.Label) {
	lane, err := l.laneOf(addrPortOf(c.RemoteAddr()), peerDst)
	if err != nil && l.Logf != nil {
		l.Logf("lane of %v: %v; labelled %v", c.RemoteAddr(), err, l.Default)
	}
	if lb, ok := l.Labels[lane]; ok {
		return lane, lb
	}
	return lane, l.Default
}

func (l *LaneLabeler) laneOf(local, peer netip.AddrPort) (string, error) {
	id, err := SocketCgroup(l.Namespace, local, peer)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lane, ok := l.byID[id]; ok {
		return lane, nil
	}
	// A group created since the last walk: walk again. A group that is
	// no lane's is remembered as such until the next walk.
	if err := l.walkLocked(); err != nil {
		return "", err
	}
	lane, ok := l.byID[id]
	if !ok {
		l.byID[id] = ""
	}
	return lane, nil
}

// walkLocked maps the ids of lanes' groups (and the groups below them) to
// their lanes.
func (l *LaneLabeler) walkLocked() error {
	root := l.V2Root
	if root == "" {
		h, err := cgroup.Detect()
		if err != nil {
			return err
		}
		if h.V2Root == "" {
			return errors.New("no cgroup v2 hierarchy: sockets' groups cannot be told")
		}
		root = h.V2Root
		l.V2Root = root
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("list %s: %w", root, err)
	}
	byID := map[uint64]string{}
	for _, e := range ents {
		g := cgroup.GroupOfPath(e.Name())
		if !e.IsDir() || g == "" {
			continue
		}
		lane := cgroup.LaneOfGroup(g)
		if lane == "" {
			continue
		}
		// The group and what is below it, a few levels down (scopes of
		// slices, sub-groups a program made).
		var walk func(dir string, depth int)
		walk = func(dir string, depth int) {
			fi, err := os.Stat(dir)
			if err != nil {
				return
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				byID[st.Ino] = lane
			}
			if depth == 0 {
				return
			}
			subs, _ := os.ReadDir(dir)
			for _, s := range subs {
				if s.IsDir() {
					walk(filepath.Join(dir, s.Name()), depth-1)
				}
			}
		}
		walk(filepath.Join(root, e.Name()), 4)
	}
	l.byID = byID
	return nil
}
