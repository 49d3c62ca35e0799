package diskidle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
)

// ResolveDevice turns "MAJ:MIN", a device node ("/dev/loop0") or a sysfs
// block name ("loop0", "vda1") into the whole disk it belongs to: the
// throttle and the foreground detector work per disk, so a partition
// stands for its disk.
func ResolveDevice(s string) (Device, error) {
	var d Device
	switch {
	case strings.Contains(s, ":"):
		var err error
		if d, err = parseMajMin(s); err != nil {
			return Device{}, err
		}
	case strings.HasPrefix(s, "/"):
		var st unix.Stat_t
		if err := unix.Stat(s, &st); err != nil {
			return Device{}, fmt.Errorf("resolve block device %s: %w", s, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFBLK {
			return Device{}, fmt.Errorf("resolve block device %s: not a block device", s)
		}
		d = Device{Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)}
	default:
		b, err := os.ReadFile(filepath.Join("/sys/class/block", s, "dev"))
		if err != nil {
			return Device{}, fmt.Errorf("resolve block device %s: %w", s, err)
		}
		if d, err = parseMajMin(string(b)); err != nil {
			return Device{}, fmt.Errorf("resolve block device %s: %w", s, err)
		}
	}
	sys, err := filepath.EvalSymlinks(filepath.Join("/sys/dev/block", d.MajMin()))
	if err != nil {
		return Device{}, fmt.Errorf("resolve block device %s: %w", s, err)
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		sys = filepath.Dir(sys) // a partition's directory sits in its disk's
		b, err := os.ReadFile(filepath.Join(sys, "dev"))
		if err != nil {
			return Device{}, fmt.Errorf("resolve block device %s: disk of partition: %w", s, err)
		}
		if d, err = parseMajMin(string(b)); err != nil {
			return Device{}, fmt.Errorf("resolve block device %s: %w", s, err)
		}
	}
	d.Name = filepath.Base(sys)
	return d, nil
}

// ProbeIdle says whether this kernel has what the disk gates need:
// blk-throttle (CONFIG_BLK_DEV_THROTTLING), kernel BTF with the
// block_bio_queue tracepoint (tp_btf programs), and a verifier that loads
// bpf/diskidle.c (ring buffer, 64-bit compare-and-swap). A conclusive
// "no" wraps errors.ErrUnsupported and names what is missing.
func ProbeIdle() error { return idleProbe.Result() }

var idleProbe = features.Probe{Name: "disk idletime", Fn: probeIdle}

func probeIdle() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return features.Missing("kernel BTF", "CONFIG_DEBUG_INFO_BTF (/sys/kernel/btf/vmlinux)", err)
	}
	var tg *btf.Struct
	if err := spec.TypeByName("throtl_grp", &tg); err != nil {
		return features.Missing("blk-throttle", "CONFIG_BLK_DEV_THROTTLING", err)
	}
	var tp *btf.Typedef
	if err := spec.TypeByName("btf_trace_block_bio_queue", &tp); err != nil {
		return features.Missing("block_bio_queue tracepoint", "CONFIG_BLOCK and CONFIG_BPF_EVENTS", err)
	}
	var objs lanesbpf.DiskidleObjects
	if err := lanesbpf.LoadDiskidleObjects(&objs, nil); err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EINVAL) {
			return features.Missing("BPF tp_btf program with ring buffer", ">= Linux 5.12 (BPF atomics, ring buffer)", err)
		}
		return fmt.Errorf("load disk idletime program: %w", err)
	}
	return objs.Close()
}

// IdleMechanism is the `lanes doctor` line for disk preemption intervals
// on hierarchy h: which throttle interface holds the background group, and
// what is missing when the gates cannot work here.
func IdleMechanism(h *cgroup.Hierarchy) features.Mechanism {
	m := features.Mechanism{Resource: "disk idletime", Backend: IdleMechanismName}
	var iface string
	switch {
	case h.BlkioRoot != "":
		if _, err := os.Stat(filepath.Join(h.BlkioRoot, "blkio.throttle.read_bps_device")); err != nil {
			m.Reason = "no blkio.throttle files in " + h.BlkioRoot + " (CONFIG_BLK_DEV_THROTTLING)"
			return m
		}
		iface = throttleV1.String()
	case h.V2Root != "":
		if err := features.HaveCgroupV2Controller("io"); err != nil {
			m.Reason = "cannot hold background I/O: " + err.Error()
			return m
		}
		iface = throttleV2.String()
	default:
		m.Reason = "no blkio (v1) or io (v2) controller"
		return m
	}
	if err := ProbeIdle(); err != nil {
		m.Reason = "no foreground detector: " + err.Error()
		return m
	}
	m.OK, m.Preferred = true, true
	m.Reason = "hold by " + iface + "; foreground seen by tp_btf/block_bio_queue; opt-in per [disk.idletime]"
	return m
}

// NewIdleGates attaches the foreground detector and returns one released
// gate per device for the background group whose directories are bgV1Dir
// (its v1 blkio group, "" if none) and bgV2Dir (its v2 group, "" if none).
// The hold uses the v1 blkio throttle files when bgV1Dir has them,
// otherwise v2 io.max in bgV2Dir (the io controller must be enabled for
// it). Bios charged to either group, or submitted by a task in the v2
// group, are background; all others on the device are foreground.
//
// The gates start released and armed: the first foreground bio on a
// device posts an Event. The caller must Close the result.
func NewIdleGates(bgV1Dir, bgV2Dir string, devices []string) (*IdleGates, error) {
	if len(devices) == 0 {
		return nil, errors.New("disk idletime gates: no device")
	}
	s := &linuxIdle{files: map[string]*os.File{}, done: make(chan struct{})}
	var dir string
	switch {
	case bgV1Dir != "" && fileExists(filepath.Join(bgV1Dir, "blkio.throttle.read_bps_device")):
		s.backend, dir = throttleV1, bgV1Dir
	case bgV2Dir != "" && fileExists(filepath.Join(bgV2Dir, "io.max")):
		s.backend, dir = throttleV2, bgV2Dir
	default:
		return nil, fmt.Errorf("disk idletime gates: %w", features.Missing("background I/O hold",
			"blkio.throttle.*_bps_device in the v1 group or io.max in the v2 group (CONFIG_BLK_DEV_THROTTLING; on v2 enable the io controller in the parent's cgroup.subtree_control)", nil))
	}
	if err := ProbeIdle(); err != nil {
		return nil, fmt.Errorf("disk idletime gates: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if err := lanesbpf.LoadDiskidleObjects(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("disk idletime gates: load program: %w", err)
	}
	s.loaded = true
	for _, d := range []string{bgV1Dir, bgV2Dir} {
		if d == "" {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return nil, fmt.Errorf("disk idletime gates: background group: %w", err)
		}
		if err := s.objs.BgCgroups.Put(st.Ino, uint8(1)); err != nil {
			return nil, fmt.Errorf("disk idletime gates: background group %s: %w", d, err)
		}
	}
	for _, w := range throttleWrites(s.backend, Device{}, true) {
		f, err := os.OpenFile(filepath.Join(dir, w.file), os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("disk idletime gates: %w", err)
		}
		s.files[w.file] = f
	}
	s.byDev = map[uint32]int{}
	gates := make([]idletime.Gate, 0, len(devices))
	for i, name := range devices {
		d, err := ResolveDevice(name)
		if err != nil {
			return nil, fmt.Errorf("disk idletime gates: %w", err)
		}
		if _, dup := s.byDev[d.kernelDev()]; dup {
			return nil, fmt.Errorf("disk idletime gates: device %s given twice", d.gateName())
		}
		s.byDev[d.kernelDev()] = i
		g := &diskGate{s: s, dev: d}
		s.gates = append(s.gates, g)
		gates = append(gates, g)
		if err := s.objs.DevState.Update(d.kernelDev(), lanesbpf.DiskidleDiskState{}, ebpf.UpdateNoExist); err != nil {
			return nil, fmt.Errorf("disk idletime gates: watch %s: %w", d.gateName(), err)
		}
		// Start from a known state: no limit left by an earlier run.
		g.held = true
		if err := g.Release(); err != nil {
			return nil, fmt.Errorf("disk idletime gates: %w", err)
		}
	}
	var err error
	if s.rd, err = ringbuf.NewReader(s.objs.DiskEvents); err != nil {
		return nil, fmt.Errorf("disk idletime gates: ring buffer: %w", err)
	}
	if s.lnk, err = link.AttachTracing(link.TracingOptions{Program: s.objs.DiskidleBioQueue}); err != nil {
		return nil, fmt.Errorf("disk idletime gates: attach to block_bio_queue: %w", err)
	}
	events := make(chan idletime.Event, 64)
	s.wg.Add(1)
	go s.read(events)
	ok = true
	return &IdleGates{Gates: gates, Events: events, impl: s}, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// linuxIdle is the kernel side of IdleGates.
type linuxIdle struct {
	backend throttleBackend
	objs    lanesbpf.DiskidleObjects
	loaded  bool
	lnk     link.Link
	rd      *ringbuf.Reader
	files   map[string]*os.File // throttle file name -> open for writing
	byDev   map[uint32]int      // kernel dev -> gate index
	gates   []*diskGate

	mu     sync.Mutex // serialises throttle writes with close
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// read turns ring buffer records into Events until close.
func (s *linuxIdle) read(events chan<- idletime.Event) {
	defer s.wg.Done()
	defer close(events)
	for {
		rec, err := s.rd.Read()
		if err != nil {
			return // closed (or a broken ring buffer): Events closes
		}
		if len(rec.RawSample) < 16 {
			continue
		}
		dev := binary.LittleEndian.Uint32(rec.RawSample[0:4])
		at := binary.LittleEndian.Uint64(rec.RawSample[8:16])
		i, ok := s.byDev[dev]
		if !ok {
			continue
		}
		select {
		case events <- idletime.Event{Gate: i, At: idletime.Mono(at)}:
		case <-s.done:
			return
		}
	}
}

// write applies the hold or release of d.
func (s *linuxIdle) write(d Device, hold bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("disk idletime gates closed")
	}
	for _, w := range throttleWrites(s.backend, d, hold) {
		if _, err := s.files[w.file].WriteAt([]byte(w.value), 0); err != nil {
			return fmt.Errorf("write %q to %s: %w", w.value, s.files[w.file].Name(), err)
		}
	}
	return nil
}

func (s *linuxIdle) close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	var errs []error
	if s.lnk != nil {
		errs = append(errs, s.lnk.Close())
	}
	// Lift every hold before closing the files: nothing may stay throttled.
	for _, g := range s.gates {
		for _, w := range throttleWrites(s.backend, g.dev, false) {
			if f := s.files[w.file]; f != nil {
				if _, err := f.WriteAt([]byte(w.value), 0); err != nil {
					errs = append(errs, fmt.Errorf("release %s: write %q to %s: %w", g.dev.gateName(), w.value, f.Name(), err))
				}
			}
		}
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.done)
	if s.rd != nil {
		errs = append(errs, s.rd.Close())
	}
	s.wg.Wait()
	for _, f := range s.files {
		errs = append(errs, f.Close())
	}
	if s.loaded {
		errs = append(errs, s.objs.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close disk idletime gates: %w", err)
	}
	return nil
}

// diskGate is one device's idletime.Gate.
type diskGate struct {
	s    *linuxIdle
	dev  Device
	held bool
}

func (g *diskGate) Name() string { return g.dev.gateName() }

// Hold disarms the detector (no events while held) and throttles the
// background group on the device to 2 bytes/s.
func (g *diskGate) Hold() error {
	if g.held {
		return nil
	}
	if err := g.s.objs.DevOpen.Put(g.dev.kernelDev(), uint32(0)); err != nil {
		return fmt.Errorf("hold %s: disarm: %w", g.Name(), err)
	}
	if err := g.s.write(g.dev, true); err != nil {
		return fmt.Errorf("hold %s: %w", g.Name(), err)
	}
	g.held = true
	return nil
}

// Release re-arms the detector first, then lifts the throttle, so that
// foreground I/O arriving in between is reported rather than missed.
func (g *diskGate) Release() error {
	if err := g.s.objs.DevOpen.Put(g.dev.kernelDev(), uint32(1)); err != nil {
		return fmt.Errorf("release %s: arm: %w", g.Name(), err)
	}
	if !g.held {
		return nil
	}
	if err := g.s.write(g.dev, false); err != nil {
		return fmt.Errorf("release %s: %w", g.Name(), err)
	}
	g.held = false
	return nil
}

func (g *diskGate) state() (lanesbpf.DiskidleDiskState, error) {
	var st lanesbpf.DiskidleDiskState
	if err := g.s.objs.DevState.Lookup(g.dev.kernelDev(), &st); err != nil {
		return st, fmt.Errorf("%s: read kernel state: %w", g.Name(), err)
	}
	return st, nil
}

// LastForeground is when the kernel last saw a foreground bio queued on
// the device.
func (g *diskGate) LastForeground() (idletime.Mono, error) {
	st, err := g.state()
	return idletime.Mono(st.LastFgNs), err
}

// LastBackground is when the kernel last saw a background bio queued on
// the device (including held bios re-queued after a release).
func (g *diskGate) LastBackground() (idletime.Mono, error) {
	st, err := g.state()
	return idletime.Mono(st.LastBgNs), err
}

// armed reports whether the detector is armed (open) for the device.
func (g *diskGate) armed() (bool, error) {
	var v uint32
	if err := g.s.objs.DevOpen.Lookup(g.dev.kernelDev(), &v); err != nil {
		return false, err
	}
	return v == 1, nil
}

// ClearIdleHolds lifts every idletime hold (a 1 or 2 bytes/s throttle limit)
// found in a background group's throttle files — what a daemon that was
// killed while holding left behind. lanes sets no other throttle limits
// in its groups; other limits are left alone. Missing files are fine.
func ClearIdleHolds(bgV1Dir, bgV2Dir string) error {
	var errs []error
	clear := func(dir, file string, held func(fields []string) bool, lift func(mm string) string) {
		if dir == "" {
			return
		}
		path := filepath.Join(dir, file)
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || !held(f) {
				continue
			}
			if err := os.WriteFile(path, []byte(lift(f[0])), 0); err != nil {
				errs = append(errs, fmt.Errorf("lift leftover hold %s in %s: %w", f[0], path, err))
			}
		}
	}
	v1Held := func(f []string) bool { return f[1] == "1" || f[1] == holdBps }
	v1Lift := func(mm string) string { return mm + " 0" }
	clear(bgV1Dir, "blkio.throttle.read_bps_device", v1Held, v1Lift)
	clear(bgV1Dir, "blkio.throttle.write_bps_device", v1Held, v1Lift)
	clear(bgV2Dir, "io.max", func(f []string) bool {
		return slices.Contains(f[1:], "rbps=1") || slices.Contains(f[1:], "rbps="+holdBps)
	}, func(mm string) string { return mm + " rbps=max wbps=max" })
	return errors.Join(errs...)
}
