package ledbat

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/internal/netprobe"
)

// bpfFLink is BPF_F_LINK: a struct_ops map registered through a BPF link
// (Linux 6.4) rather than by its map update.
const bpfFLink = 1 << 13

// Registration is lanes_ledbat registered with the kernel by this process,
// or found registered by another (then Close leaves it).
type Registration struct {
	mu     sync.Mutex
	coll   *ebpf.Collection
	link   link.Link
	shared bool
}

// Available says whether lanes_ledbat can be registered here: BPF
// struct_ops congestion controls (netprobe.HaveStructOpsCC).
func Available() error { return netprobe.HaveStructOpsCC() }

// Register loads lanes_ledbat and registers it with the kernel, through a
// BPF link where the kernel has struct_ops links and by the map's update
// before that. If a congestion control called Name is registered already
// (another lanesd, or one that crashed while sockets still use it), that
// one is used and the returned Registration's Close leaves it.
func Register() (*Registration, error) {
	if err := Available(); err != nil {
		return nil, fmt.Errorf("register %s: %w", Name, err)
	}
	if Registered() {
		return &Registration{shared: true}, nil
	}
	spec, err := lanesbpf.LoadLedbat()
	if err != nil {
		return nil, fmt.Errorf("register %s: load spec: %w", Name, err)
	}
	delete(spec.Programs, "ledbat_test") // the rule tests' program and map
	delete(spec.Maps, "ledbat_test_io")
	coll, err := ebpf.NewCollection(spec)
	viaLink := true
	if err != nil && (errors.Is(err, unix.EINVAL) || errors.Is(err, ebpf.ErrNotSupported)) {
		// Before Linux 6.4 a struct_ops map cannot have BPF_F_LINK: the
		// map's update registers it, and closing it unregisters.
		spec.Maps["lanes_ledbat"].Flags &^= bpfFLink
		if c, err2 := ebpf.NewCollection(spec); err2 == nil {
			coll, err, viaLink = c, nil, false
		}
	}
	if err != nil {
		if errors.Is(err, unix.EEXIST) && Registered() {
			return &Registration{shared: true}, nil
		}
		return nil, fmt.Errorf("register %s: %w", Name, err)
	}
	r := &Registration{coll: coll}
	if viaLink {
		l, err := link.AttachStructOps(link.StructOpsOptions{Map: coll.Maps["lanes_ledbat"]})
		if err != nil {
			coll.Close()
			if errors.Is(err, unix.EEXIST) && Registered() {
				return &Registration{shared: true}, nil
			}
			return nil, fmt.Errorf("register %s: %w", Name, err)
		}
		r.link = l
	}
	if !Registered() {
		r.Close()
		return nil, fmt.Errorf("register %s: not in the kernel's available congestion controls after registering", Name)
	}
	return r, nil
}

// Shared says whether the registration is another process's.
func (r *Registration) Shared() bool { return r.shared }

// Close unregisters what Register registered. Sockets using lanes_ledbat
// keep it until they close; new ones can no longer choose it.
func (r *Registration) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if r.link != nil {
		errs = append(errs, r.link.Close())
		r.link = nil
	}
	if r.coll != nil {
		r.coll.Close()
		r.coll = nil
	}
	return errors.Join(errs...)
}

const (
	availablePath = "/proc/sys/net/ipv4/tcp_available_congestion_control"
	defaultPath   = "/proc/sys/net/ipv4/tcp_congestion_control"
)

// Registered says whether a congestion control called Name is registered.
func Registered() bool {
	b, err := os.ReadFile(availablePath)
	if err != nil {
		return false
	}
	for _, f := range strings.Fields(string(b)) {
		if f == Name {
			return true
		}
	}
	return false
}

// Default returns the default TCP congestion control of the calling
// thread's network namespace.
func Default() (string, error) {
	b, err := os.ReadFile(defaultPath)
	if err != nil {
		return "", fmt.Errorf("default congestion control: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// SocketCC returns the congestion control of the TCP socket fd.
func SocketCC(fd int) (string, error) {
	s, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	if err != nil {
		return "", fmt.Errorf("get TCP_CONGESTION: %w", err)
	}
	return strings.TrimRight(s, "\x00"), nil
}

// SetSocket sets the congestion control of the TCP socket fd.
func SetSocket(fd int, cc string) error {
	if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc); err != nil {
		return fmt.Errorf("set TCP_CONGESTION %s: %w", cc, err)
	}
	return nil
}
