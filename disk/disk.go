package disk

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/lane"
)

// Kernel ioprio encoding: class in the top 3 bits of 16, data (level) in
// the low 13.
const (
	classShift = 13
	dataMask   = 1<<classShift - 1

	classNone = 0
	classRT   = 1
	classBE   = 2
	classIdle = 3
)

// Encode turns a class and level into the raw ioprio value. The idle class
// has no levels; its level is 0.
func Encode(c lane.IOClass, level int) (uint16, error) {
	if level < 0 || level > 7 {
		return 0, fmt.Errorf("ioprio level %d out of range 0..7", level)
	}
	switch c {
	case lane.IONone:
		return 0, nil
	case lane.IORealtime:
		return classRT<<classShift | uint16(level), nil
	case lane.IOBestEffort:
		return classBE<<classShift | uint16(level), nil
	case lane.IOIdle:
		return classIdle << classShift, nil
	}
	return 0, fmt.Errorf("unknown I/O class %q", c)
}

// Decode splits a raw ioprio value into class and level.
func Decode(raw uint16) (lane.IOClass, int, error) {
	level := int(raw & dataMask)
	switch raw >> classShift {
	case classNone:
		return lane.IONone, 0, nil
	case classRT:
		return lane.IORealtime, level, nil
	case classBE:
		return lane.IOBestEffort, level, nil
	case classIdle:
		return lane.IOIdle, 0, nil
	}
	return "", 0, fmt.Errorf("unknown ioprio class %d in %#x", raw>>classShift, raw)
}

// Saved holds the raw ioprio of each thread before ApplyProcess changed
// it, for RestoreProcess.
type Saved map[int]uint16

// weightBackend names the group file that carries the I/O weight.
type weightBackend int

const (
	weightNone weightBackend = iota // ioprio only
	weightV2                        // io.weight "default N" (1..10000)
	weightBFQ                       // v1 blkio.bfq.weight (1..1000)
)

// weightSetting is the file and value that give a group weight w (0: the
// kernel default, 100).
func weightSetting(b weightBackend, w int) (ctrl, file, value string, ok bool) {
	if w <= 0 {
		w = 100
	}
	switch b {
	case weightV2:
		if w > 10000 {
			w = 10000
		}
		return cgroup.Blkio, "io.weight", "default " + strconv.Itoa(w), true
	case weightBFQ:
		if w > 1000 {
			w = 1000
		}
		return cgroup.Blkio, "blkio.bfq.weight", strconv.Itoa(w), true
	}
	return "", "", "", false
}

// Enforcer applies the group part of a lane's disk settings.
type Enforcer struct {
	h       *cgroup.Hierarchy
	logf    func(format string, args ...any)
	files   cgroup.Files
	backend weightBackend
	mech    features.Mechanism
}

// Apply sets the group's I/O weight where the host has a weight file
// (io.weight on v2 with the io controller, blkio.bfq.weight on v1 with
// BFQ), otherwise does nothing: the threads' ioprio carries the lane. On
// v1 it also makes blkio count the group's I/O (account). It may be called
// repeatedly with identical input; an unchanged file is not written.
func (e *Enforcer) Apply(g cgroup.Group, d lane.Disk) error {
	if e.backend == weightBFQ {
		if err := e.account(g); err != nil {
			return fmt.Errorf("apply disk settings to %s: %w", g.Name(), err)
		}
	}
	ctrl, file, value, ok := weightSetting(e.backend, d.Weight)
	if !ok {
		return nil
	}
	if !g.HasFile(ctrl, file) {
		return nil // e.g. no BFQ-scheduled device: ioprio only
	}
	cur, err := e.files.ReadFile(g, ctrl, file)
	if err != nil {
		return fmt.Errorf("apply disk settings to %s: %w", g.Name(), err)
	}
	if sameWeight(cur, value) {
		return nil
	}
	if err := e.files.WriteFile(g, ctrl, file, value); err != nil {
		return fmt.Errorf("apply disk settings to %s: %w", g.Name(), err)
	}
	e.logf("disk: %s: %s %q -> %q", g.Name(), file, cur, value)
	return nil
}

// account makes v1 blkio count the group's I/O on every disk: v1 counts
// a group's reads and writes on a device (blkio.throttle.io_service_bytes
// and io_serviced, what the lane monitors read) only while blk-throttle
// has a rule for that group, device and direction. It adds a read and a
// write bps rule of cgroup.V1AccountBps per disk where the group has none; the
// rules go with the group (lanes' groups are removed on stop), the
// host's own groups are never touched.
func (e *Enforcer) account(g cgroup.Group) error {
	if !g.HasFile(cgroup.Blkio, "blkio.throttle.read_bps_device") {
		return nil // no blk-throttle in this kernel
	}
	devs := e.disks()
	for _, file := range []string{"blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"} {
		cur, err := e.files.ReadFile(g, cgroup.Blkio, file)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, line := range strings.Split(cur, "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				have[f[0]] = true
			}
		}
		for _, dev := range devs {
			if have[dev] {
				continue // ours, or a limit someone set: kept either way
			}
			if err := e.files.WriteFile(g, cgroup.Blkio, file, fmt.Sprintf("%s %d", dev, uint64(cgroup.V1AccountBps))); err != nil {
				return fmt.Errorf("%s %s: %w", file, dev, err)
			}
		}
	}
	return nil
}

// sameWeight compares a weight file's content with a value to write. The
// v2 io.weight file lists "default N" first, then per-device lines.
func sameWeight(cur, want string) bool {
	first, _, _ := strings.Cut(cur, "\n")
	return strings.Join(strings.Fields(first), " ") == want
}

// Mechanism says which backend is in use and why, for `lanes doctor`.
func (e *Enforcer) Mechanism() features.Mechanism { return e.mech }

// ActiveScheduler picks the bracketed entry of a queue/scheduler file,
// e.g. "none [mq-deadline] kyber bfq" -> "mq-deadline".
func ActiveScheduler(text string) string {
	for _, f := range strings.Fields(text) {
		if len(f) > 2 && f[0] == '[' && f[len(f)-1] == ']' {
			return f[1 : len(f)-1]
		}
	}
	return ""
}

// describeSchedulers says which devices honour ioprio classes (bfq,
// mq-deadline) and BFQ weights (bfq), e.g. "ioprio classes act on vda
// (mq-deadline); bfq weights on no device".
func describeSchedulers(scheds map[string]string) string {
	var prio, bfq, ignore []string
	devs := make([]string, 0, len(scheds))
	for d := range scheds {
		devs = append(devs, d)
	}
	sort.Strings(devs)
	for _, d := range devs {
		switch s := scheds[d]; s {
		case "bfq":
			bfq = append(bfq, d)
			prio = append(prio, d+" (bfq)")
		case "mq-deadline":
			prio = append(prio, d+" (mq-deadline)")
		default:
			ignore = append(ignore, d+" ("+s+")")
		}
	}
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "no device"
		}
		return strings.Join(xs, ", ")
	}
	out := "ioprio classes act on " + list(prio) + "; bfq weights on " + list(bfq)
	if len(ignore) > 0 {
		out += "; ignored by " + list(ignore)
	}
	return out
}
