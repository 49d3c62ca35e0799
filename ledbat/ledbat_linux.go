package ledbat

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

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
// before that. If a live process registered a congestion control called
// Name already (another lanesd, a test), that one is used and the returned
// Registration's Close leaves it; one that a lanesd which crashed left
// registered (before Linux 6.4: unregisterStale) is unregistered first.
func Register() (*Registration, error) {
	if err := Available(); err != nil {
		return nil, fmt.Errorf("register %s: %w", Name, err)
	}
	if Registered() {
		if !unregisterStale() {
			return &Registration{shared: true}, nil
		}
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
		// map's update registers it, and only deleting its element
		// unregisters (the registration holds the map).
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

// SetTarget sets TARGET, the queueing delay every connection using
// lanes_ledbat steers to (LEDBAT++'s 60 ms until set); connections using
// it already follow the new value. A shared registration (another
// process's) keeps its own: an error.
func (r *Registration) SetTarget(d time.Duration) error {
	if err := CheckTarget(d); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shared || r.coll == nil {
		return fmt.Errorf("%s is registered by another process: its target stays its own", Name)
	}
	v := r.coll.Variables["target_us"]
	if v == nil {
		return fmt.Errorf("%s: no target_us variable", Name)
	}
	if err := v.Set(uint32(d / time.Microsecond)); err != nil {
		return fmt.Errorf("set %s's target: %w", Name, err)
	}
	return nil
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
	} else if r.coll != nil {
		if err := r.coll.Maps["lanes_ledbat"].Delete(uint32(0)); err != nil {
			errs = append(errs, fmt.Errorf("unregister %s: %w", Name, err))
		}
	}
	if r.coll != nil {
		r.coll.Close()
		r.coll = nil
	}
	return errors.Join(errs...)
}

// unregisterStale removes a registration of lanes_ledbat that no process
// holds any more and says whether it did. Before Linux 6.4 a struct_ops
// map is registered by its update and stays registered, and the map alive,
// after the process that registered it exits: a lanesd that crashed leaves
// it. Such a map is one no process has a file descriptor of; deleting its
// element unregisters it (sockets using it keep it until they close). A
// registration through a BPF link ends with the link's process.
func unregisterStale() bool {
	removed := false
	for id, err := ebpf.MapGetNextID(0); err == nil; id, err = ebpf.MapGetNextID(id) {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue
		}
		info, err := m.Info()
		if err == nil && info.Type == ebpf.StructOpsMap && info.Name == "lanes_ledbat" && info.Flags&bpfFLink == 0 &&
			!mapHeld(id, m.FD()) && m.Delete(uint32(0)) == nil {
			removed = true
		}
		m.Close()
	}
	return removed && !Registered()
}

// mapHeld says whether any process has a file descriptor of BPF map id,
// other than this process's descriptor except.
func mapHeld(id ebpf.MapID, except int) bool {
	self := os.Getpid()
	want := fmt.Sprintf("map_id:\t%d\n", id)
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: leave it
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if n, _ := strconv.Atoi(fd.Name()); pid == self && n == except {
				continue
			}
			if target, err := os.Readlink(dir + "/" + fd.Name()); err != nil || target != "anon_inode:bpf-map" {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
			if err == nil && strings.Contains(string(b), want) {
				return true
			}
		}
	}
	return false
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
