package disk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/lane"
)

const whoProcess = 1 // IOPRIO_WHO_PROCESS: with a TID, that one thread

func ioprioGet(tid int) (uint16, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, whoProcess, uintptr(tid), 0)
	if errno != 0 {
		return 0, errno
	}
	return uint16(r), nil
}

func ioprioSet(tid int, raw uint16) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, whoProcess, uintptr(tid), uintptr(raw)); errno != 0 {
		return errno
	}
	return nil
}

func threadErr(op string, tid int, err error) error {
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("%s of thread %d: %w", op, tid, &cgroup.ProcessError{PID: tid})
	}
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%s of thread %d: %w (the realtime class needs CAP_SYS_ADMIN or CAP_SYS_NICE)", op, tid, err)
	}
	return fmt.Errorf("%s of thread %d: %w", op, tid, err)
}

// GetIOPrio reads the I/O class and level of one thread.
func GetIOPrio(tid int) (lane.IOClass, int, error) {
	raw, err := ioprioGet(tid)
	if err != nil {
		return "", 0, threadErr("get ioprio", tid, err)
	}
	return Decode(raw)
}

// SetIOPrio sets the I/O class and level of one thread. IONone resets it
// to "none" (the kernel derives the priority from the CPU nice value).
func SetIOPrio(tid int, c lane.IOClass, level int) error {
	raw, err := Encode(c, level)
	if err != nil {
		return fmt.Errorf("set ioprio of thread %d: %w", tid, err)
	}
	if err := ioprioSet(tid, raw); err != nil {
		return threadErr("set ioprio", tid, err)
	}
	return nil
}

// ApplyProcess sets d's class and level on every thread of pid and returns
// each changed thread's previous value. The thread list is walked twice to
// catch threads created during the first walk; threads and children
// created afterwards inherit the priority on clone. IONone leaves the
// process alone.
func ApplyProcess(pid int, d lane.Disk) (Saved, error) { return ApplyThreads(pid, nil, d) }

// ApplyThreads is ApplyProcess whose first walk goes over tids, the
// threads the caller has just listed (or knows: a process /proc/PID/stat
// gave one thread has only pid), saving one listing of /proc/PID/task;
// the second walk lists them. nil tids: both walks list.
func ApplyThreads(pid int, tids []int, d lane.Disk) (Saved, error) {
	return applyPasses(pid, tids, d, 2)
}

// ApplyListed sets d's class and level on the threads tids of pid only,
// without listing them: for a caller that learns afterwards whether the
// process has others (procwatch's placement check), and calls
// ApplyThreads for those that do.
func ApplyListed(pid int, tids []int, d lane.Disk) (Saved, error) {
	if tids == nil {
		tids = []int{pid}
	}
	return applyPasses(pid, tids, d, 1)
}

// applyPasses walks the threads passes times: the first over tids (nil:
// listed), the others over a listing.
func applyPasses(pid int, tids []int, d lane.Disk, passes int) (Saved, error) {
	saved := Saved{}
	if d.Class == lane.IONone {
		return saved, nil
	}
	raw, err := Encode(d.Class, d.Level)
	if err != nil {
		return saved, fmt.Errorf("apply ioprio to %d: %w", pid, err)
	}
	seen := map[int]bool{}
	for pass := 0; pass < passes; pass++ {
		if pass > 0 || tids == nil {
			var err error
			if tids, err = cgroup.Threads(pid); err != nil {
				return saved, fmt.Errorf("apply ioprio to %d: %w", pid, err)
			}
		}
		for _, tid := range tids {
			if seen[tid] {
				continue
			}
			seen[tid] = true
			old, err := ioprioGet(tid)
			if errors.Is(err, unix.ESRCH) {
				continue // exited meanwhile
			}
			if err != nil {
				return saved, fmt.Errorf("apply ioprio to %d: %w", pid, threadErr("get ioprio", tid, err))
			}
			if old == raw {
				continue
			}
			if err := ioprioSet(tid, raw); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue
				}
				return saved, fmt.Errorf("apply ioprio to %d: %w", pid, threadErr("set ioprio", tid, err))
			}
			saved[tid] = old
		}
	}
	return saved, nil
}

// RestoreProcess puts back the values ApplyProcess saved. Threads that
// have exited are skipped.
func RestoreProcess(pid int, s Saved) error {
	var errs []error
	for tid, raw := range s {
		if err := ioprioSet(tid, raw); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, threadErr("restore ioprio", tid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("restore ioprio of %d: %w", pid, err)
	}
	return nil
}

// Schedulers returns the active I/O scheduler of each block device
// (/sys/block/DEV/queue/scheduler, the bracketed one), leaving out loop,
// ram and zram devices, which do not schedule.
func Schedulers() (map[string]string, error) {
	ents, err := os.ReadDir("/sys/block")
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	out := map[string]string{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "zram") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/block", name, "queue", "scheduler"))
		if err != nil {
			continue // no request queue
		}
		if sched := ActiveScheduler(string(b)); sched != "" {
			out[name] = sched
		}
	}
	return out, nil
}

// schedulerNote says which devices honour ioprio classes and which
// honour BFQ weights, for the doctor's reason.
func schedulerNote() string {
	scheds, err := Schedulers()
	if err != nil {
		return err.Error()
	}
	return describeSchedulers(scheds)
}

// iocostNote says whether io.weight takes effect: it needs the iocost
// controller enabled for a device (a line with enable=1 in the root's
// io.cost.qos).
func iocostNote(v2root string) string {
	b, err := os.ReadFile(filepath.Join(v2root, "io.cost.qos"))
	if err != nil {
		return "io.weight inert: no io.cost.qos (CONFIG_BLK_CGROUP_IOCOST)"
	}
	var on []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && slices.Contains(f[1:], "enable=1") {
			on = append(on, f[0])
		}
	}
	if len(on) == 0 {
		return "io.weight inert until iocost is enabled in io.cost.qos"
	}
	return "iocost enabled on " + strings.Join(on, ", ")
}

// New probes the host and returns an enforcer for hierarchy h.
func New(h *cgroup.Hierarchy, logf func(string, ...any)) (*Enforcer, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	e := &Enforcer{h: h, logf: logf, files: cgroup.FS{}}
	e.mech = features.Mechanism{Resource: "disk", OK: true}
	switch h.Mode {
	case cgroup.ModeUnified:
		err := features.HaveCgroupV2Controller("io")
		switch {
		case err == nil:
			e.backend = weightV2
			e.mech.Backend = "cgroup v2 io.weight + ioprio per thread"
			e.mech.Preferred = true
			e.mech.Reason = "io controller in cgroup v2"
		case errors.Is(err, features.ErrNotSupported):
			e.mech.Backend = "ioprio per thread"
			e.mech.Reason = err.Error()
		default:
			return nil, fmt.Errorf("disk enforcer: %w", err)
		}
	default:
		if h.BlkioRoot == "" {
			e.mech.Backend = "ioprio per thread"
			e.mech.Reason = "no cgroup v1 blkio hierarchy and no io controller in cgroup v2"
			break
		}
		e.backend = weightBFQ
		e.mech.Backend = "cgroup v1 blkio.bfq.weight (devices scheduled by BFQ) + ioprio per thread"
		e.mech.Reason = "blkio controller bound to cgroup v1 at " + h.BlkioRoot +
			"; each lane group has a no-op blk-throttle rule (1 PB/s) per disk, so that blkio counts its I/O for the lane monitors"
	}
	if e.backend == weightV2 {
		e.mech.Reason += "; " + iocostNote(h.V2Root)
	}
	e.mech.Reason += "; " + schedulerNote()
	return e, nil
}

// Snapshot returns the raw ioprio of each thread in tids, as RestoreProcess
// takes it; threads that have exited are left out.
func Snapshot(tids []int) Saved {
	s := Saved{}
	for _, tid := range tids {
		if raw, err := ioprioGet(tid); err == nil {
			s[tid] = raw
		}
	}
	return s
}

// disks lists the block devices with a size (major:minor), whole disks
// only: /sys/block has no partitions. Loop and RAM devices count when
// they hold data, as any other.
func (e *Enforcer) disks() []string {
	ents, err := os.ReadDir("/sys/block")
	if err != nil {
		return nil
	}
	var out []string
	for _, ent := range ents {
		dir := filepath.Join("/sys/block", ent.Name())
		size, err := os.ReadFile(filepath.Join(dir, "size"))
		if err != nil || strings.TrimSpace(string(size)) == "0" {
			continue
		}
		dev, err := os.ReadFile(filepath.Join(dir, "dev"))
		if err != nil {
			continue
		}
		out = append(out, strings.TrimSpace(string(dev)))
	}
	return out
}
