package diskidle

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/cgroup"
)

// How it works (seed 003's disk scheduler, done with
// real kernel mechanisms instead of a patched I/O scheduler):
//
//   - Foreground detection: a BPF program on the block_bio_queue tracepoint
//     (bpf/diskidle.c) sees every bio submitted to a managed device, tells
//     the background group's bios from everyone else's by cgroup, stamps
//     the last foreground and background times, and posts one Event when
//     foreground I/O arrives while the gate is released.
//   - Hold: a blk-throttle limit of 2 bytes/s for reads and writes on the
//     device for the background group (v1 blkio.throttle.*_bps_device, or
//     v2 io.max rbps=2 wbps=2). New background bios wait in the throttle
//     queue, above the I/O scheduler, so the device never sees them; bios
//     already dispatched complete (a started request is not preempted).
//   - Release: the limit is lifted, blk-throttle dispatches the waiting
//     bios at once.
//
// Why blk-throttle and not the v1 freezer or cgroup.freeze: freezing stops
// the background group's CPU work too (and takes milliseconds to reach a
// task sleeping in I/O), while a throttle holds only its I/O and only on
// the devices concerned, per device, which is what the paper's PI is.

// IdleMechanismName is the backend name `lanes doctor` shows.
const IdleMechanismName = "blk-throttle hold + BPF tracepoint"

// Device is a whole block device as the kernel numbers it.
type Device struct {
	Major, Minor uint32
	Name         string // e.g. "loop0", "vda"; "" when unknown
}

// MajMin is the "MAJ:MIN" form cgroup throttle files take.
func (d Device) MajMin() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// kernelDev is the kernel's internal dev_t (major << 20 | minor), the key
// of the BPF maps.
func (d Device) kernelDev() uint32 { return d.Major<<20 | d.Minor }

// gateName is the Gate's name, e.g. "disk loop0 (7:0)".
func (d Device) gateName() string {
	if d.Name == "" {
		return "disk " + d.MajMin()
	}
	return "disk " + d.Name + " (" + d.MajMin() + ")"
}

// parseMajMin parses "MAJ:MIN".
func parseMajMin(s string) (Device, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Device{}, fmt.Errorf("device number %q: want MAJ:MIN", s)
	}
	maj, err := strconv.ParseUint(a, 10, 12)
	if err != nil {
		return Device{}, fmt.Errorf("device number %q: major: %w", s, err)
	}
	min, err := strconv.ParseUint(b, 10, 20)
	if err != nil {
		return Device{}, fmt.Errorf("device number %q: minor: %w", s, err)
	}
	return Device{Major: uint32(maj), Minor: uint32(min)}, nil
}

// throttleBackend is the cgroup interface that holds a group's I/O.
type throttleBackend int

const (
	throttleV1 throttleBackend = iota // blkio.throttle.{read,write}_bps_device
	throttleV2                        // io.max
)

func (b throttleBackend) String() string {
	if b == throttleV1 {
		return "cgroup v1 blkio.throttle.read_bps_device/write_bps_device"
	}
	return "cgroup v2 io.max"
}

// holdBps is the throttle limit, in bytes/s, that holds a group's I/O.
const holdBps = "2"

// throttleWrite is one write to a throttle file.
type throttleWrite struct{ file, value string }

// throttleWrites lists what holds (hold) or releases d for backend b. The
// hold is 2 bytes/s, the smallest limit every kernel's files take (0 is
// "none", and io.max before 6.x refuses 1): a 4 KiB bio would wait more
// than half an hour, i.e. until the release.
func throttleWrites(b throttleBackend, d Device, hold bool) []throttleWrite {
	mm := d.MajMin()
	if b == throttleV2 {
		if hold {
			return []throttleWrite{{"io.max", mm + " rbps=" + holdBps + " wbps=" + holdBps}}
		}
		return []throttleWrite{{"io.max", mm + " rbps=max wbps=max"}}
	}
	// A release puts v1's counting rule back rather than none, so that
	// blkio goes on counting the lane's I/O (cgroup.V1AccountBps).
	v := " " + strconv.FormatUint(cgroup.V1AccountBps, 10)
	if hold {
		v = " " + holdBps
	}
	return []throttleWrite{{"blkio.throttle.read_bps_device", mm + v}, {"blkio.throttle.write_bps_device", mm + v}}
}

// limitLeft reports whether the content of a throttle file still limits
// d's bandwidth (for cleanup checks): v1 lists "MAJ:MIN bps" lines for
// limited devices only; v2 lists "MAJ:MIN rbps=.. wbps=.. riops=..
// wiops=.." with "max" for no limit.
func limitLeft(content string, d Device) bool {
	mm := d.MajMin()
	for _, line := range strings.Split(content, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != mm {
			continue
		}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok { // v1: "MAJ:MIN bps"; the counting rule does not limit
				if kv != "0" && kv != strconv.FormatUint(cgroup.V1AccountBps, 10) {
					return true
				}
				continue
			}
			if (k == "rbps" || k == "wbps") && v != "max" {
				return true
			}
		}
	}
	return false
}

// IdleGates are the idletime gates of one background group on a set of
// block devices, with the kernel's foreground events. Gates[i] is the
// gate of the i-th device given to NewIdleGates, and Event.Gate indexes
// Gates. Events is closed when the reader stops (Close). Close removes
// every hold and detaches the kernel program.
//
// A daemon builds it for the background lane's group on the devices its
// [disk.idletime] names, and hands Gates and Events to idletime's
// Controller:
//
//	g := h.LaneGroup("background")
//	v1, _ := g.Dir(cgroup.Blkio) // only when h.BlkioRoot != ""
//	ig, err := disk.NewIdleGates(v1, g.V2Path(), []string{"/dev/sda"})
//	...
//	defer ig.Close()
type IdleGates struct {
	Gates  []idletime.Gate
	Events <-chan idletime.Event
	impl   idleImpl
}

// idleImpl is the OS part of IdleGates.
type idleImpl interface{ close() error }

// Close releases every device, removes the throttle limits, detaches the
// BPF program and closes Events. It is safe to call more than once.
func (s *IdleGates) Close() error {
	if s == nil || s.impl == nil {
		return nil
	}
	return s.impl.close()
}
