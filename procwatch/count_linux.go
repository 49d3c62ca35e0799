package procwatch

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	lanesbpf "github.com/lanes-qos/lanes/bpf"
	"github.com/lanes-qos/lanes/internal/features"
)

// MaxCount is how many groups one run of the count program takes.
const MaxCount = len(lanesbpf.ProccountCountCtx{}.G)

var countProbe = features.Probe{Name: "process count (BPF)", Fn: probeCount}

// ProbeCount says whether this kernel runs bpf/proccount.c: a sleepable
// BPF syscall program with the bpf_cgroup_from_id kfunc (Linux 6.2) and
// the css task iterator (Linux 6.7). A conclusive "no" wraps
// errors.ErrUnsupported.
func ProbeCount() error { return countProbe.Result() }

func probeCount() error {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return features.Missing("kernel BTF", "CONFIG_DEBUG_INFO_BTF (/sys/kernel/btf/vmlinux)", err)
	}
	for _, kf := range []struct{ name, since string }{
		{"bpf_cgroup_from_id", ">= Linux 6.2"},
		{"bpf_iter_css_task_new", ">= Linux 6.7"},
	} {
		var fn *btf.Func
		if err := spec.TypeByName(kf.name, &fn); err != nil {
			return features.Missing("kfunc "+kf.name, kf.since, err)
		}
	}
	c, err := loadCount()
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Count(nil)
	return err
}

// Counter counts the processes of cgroup v2 groups in the kernel
// (bpf/proccount.c): the walk that listing a group's cgroup.procs makes,
// without formatting every PID as text to count lines of.
type Counter struct{ *syscallProg }

// The layout of struct count_ctx (bpf/proccount.c), checked against the
// generated type.
const (
	countHeader = 8  // n, pad
	groupSize   = 16 // id, procs, gone
)

func init() {
	var c lanesbpf.ProccountCountCtx
	if unsafe.Sizeof(c) != countHeader+uintptr(len(c.G))*groupSize || unsafe.Offsetof(c.G) != countHeader ||
		unsafe.Offsetof(c.G[0].Procs) != 8 || unsafe.Offsetof(c.G[0].Gone) != 12 {
		panic("procwatch: struct count_ctx's layout is not the one Count encodes")
	}
}

// NewCounter loads the program, or says why it cannot (wrapping
// errors.ErrUnsupported where the kernel lacks it).
func NewCounter() (*Counter, error) {
	if err := ProbeCount(); err != nil {
		return nil, fmt.Errorf("process count (BPF): %w", err)
	}
	return loadCount()
}

func loadCount() (*Counter, error) {
	spec, err := lanesbpf.LoadProccount()
	if err != nil {
		return nil, fmt.Errorf("load the process count: %w", err)
	}
	p, err := loadSyscallProg("the process count", spec, "proccount", int(unsafe.Sizeof(lanesbpf.ProccountCountCtx{})),
		"sleepable BPF syscall program with the css task iterator", ">= Linux 6.7")
	if err != nil {
		return nil, err
	}
	return &Counter{p}, nil
}

// Count returns how many processes each group holds, by cgroup v2 id (at
// most MaxCount ids); a group that no longer exists counts -1.
func (c *Counter) Count(ids []uint64) ([]int, error) {
	if len(ids) > MaxCount {
		return nil, fmt.Errorf("process count: %d groups, at most %d", len(ids), MaxCount)
	}
	le := binary.LittleEndian
	out := make([]int, len(ids))
	err := c.run(countHeader+len(ids)*groupSize, func(b []byte) {
		le.PutUint32(b, uint32(len(ids)))
		for i, id := range ids {
			le.PutUint64(b[countHeader+i*groupSize:], id)
		}
	}, func(b []byte) {
		for i := range ids {
			r := b[countHeader+i*groupSize:]
			out[i] = int(le.Uint32(r[8:]))
			if le.Uint32(r[12:]) != 0 {
				out[i] = -1
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
