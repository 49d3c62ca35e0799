package procwatch

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/procfs"
)

// Per-process flags of bpf/procsettle.c.
const (
	settleGone         = 1
	settleSockets      = 2
	settleFDsUnread    = 4
	settleChildrenMore = 8
)

// MaxSettle is how many processes one run of the settle program takes.
const MaxSettle = len(lanesbpf.ProcsettleSettleCtx{}.P)

var settleProbe = features.Probe{Name: "placement check (BPF)", Fn: probeSettle}

// ProbeSettle says whether this kernel runs bpf/procsettle.c: a BPF syscall
// program (BPF_PROG_RUN) with bpf_loop, the bpf_task_from_pid kfunc (Linux
// 6.2) and memory-mapped global data. A conclusive "no" wraps
// errors.ErrUnsupported.
func ProbeSettle() error { return settleProbe.Result() }

func probeSettle() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return features.Missing("kernel BTF", "CONFIG_DEBUG_INFO_BTF (/sys/kernel/btf/vmlinux)", err)
	}
	for _, kf := range []string{"bpf_task_from_pid", "bpf_task_release"} {
		var fn *btf.Func
		if err := spec.TypeByName(kf, &fn); err != nil {
			return features.Missing("kfunc "+kf, ">= Linux 6.2", err)
		}
	}
	s, err := load()
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.Settle(nil); err != nil {
		return err
	}
	return nil
}

// Settler checks processes just moved into a lane for what they still
// have outside it (bpf/procsettle.c).
type Settler struct{ *syscallProg }

// The layout of struct settle_ctx (bpf/procsettle.c), checked against the
// generated type.
const (
	ctxHeader = 8  // n, pad
	procSize  = 48 // pid, flags, start, threads, nchildren, children[6]
)

func init() {
	var c lanesbpf.ProcsettleSettleCtx
	if unsafe.Sizeof(c) != ctxHeader+uintptr(len(c.P))*procSize || unsafe.Offsetof(c.P) != ctxHeader ||
		unsafe.Sizeof(c.P[0]) != procSize || unsafe.Offsetof(c.P[0].Children) != 24 {
		panic("procwatch: struct settle_ctx's layout is not the one Settle encodes")
	}
}

// NewSettler loads the program.
func NewSettler() (*Settler, error) {
	if err := ProbeSettle(); err != nil {
		return nil, fmt.Errorf("placement check (BPF): %w", err)
	}
	return load()
}

func load() (*Settler, error) {
	if procfs.UserHZ != 100 {
		return nil, features.Missing("placement check (BPF)", "USER_HZ 100 (the program's clock ticks)", nil)
	}
	spec, err := lanesbpf.LoadProcsettle()
	if err != nil {
		return nil, fmt.Errorf("load the placement check: %w", err)
	}
	p, err := loadSyscallProg("the placement check", spec, "procsettle", int(unsafe.Sizeof(lanesbpf.ProcsettleSettleCtx{})),
		"BPF syscall program with bpf_task_from_pid", ">= Linux 6.2")
	if err != nil {
		return nil, err
	}
	return &Settler{p}, nil
}

// Proc is a process to check: its PID and start time in clock ticks.
type Proc struct {
	PID   int
	Start uint64
}

// Settled is what a process still has outside its new groups.
type Settled struct {
	// Gone: it exited, or its PID is another process's now.
	Gone bool
	// Threads is its thread count: above one, threads it started before
	// its I/O priority changed may keep the old one.
	Threads int
	// Children are its child processes whose cgroups differ from its
	// own (at most 6); MoreChildren says there are more.
	Children     []int
	MoreChildren bool
	// Sockets: one of its first 64 descriptors is a socket, or it has
	// descriptors beyond them (not looked at).
	Sockets bool
}

// Settle checks procs (at most MaxSettle). Call it after they moved and
// got their I/O priority: a thread, child or socket they start after that
// is in their new group with their new priority.
func (s *Settler) Settle(procs []Proc) ([]Settled, error) {
	if len(procs) > MaxSettle {
		return nil, fmt.Errorf("placement check: %d processes, at most %d", len(procs), MaxSettle)
	}
	le := binary.LittleEndian
	out := make([]Settled, len(procs))
	err := s.run(ctxHeader+len(procs)*procSize, func(b []byte) {
		le.PutUint32(b, uint32(len(procs)))
		for i, p := range procs {
			r := b[ctxHeader+i*procSize:]
			le.PutUint32(r, uint32(p.PID))
			le.PutUint64(r[8:], p.Start)
		}
	}, func(b []byte) {
		for i := range procs {
			r := b[ctxHeader+i*procSize:]
			flags := le.Uint32(r[4:])
			o := &out[i]
			o.Gone = flags&settleGone != 0
			o.Threads = int(le.Uint32(r[16:]))
			o.Sockets = flags&(settleSockets|settleFDsUnread) != 0
			o.MoreChildren = flags&settleChildrenMore != 0
			for k := range min(int(le.Uint32(r[20:])), 6) {
				o.Children = append(o.Children, int(le.Uint32(r[24+4*k:])))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
