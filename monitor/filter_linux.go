package monitor

import (
	"encoding/binary"

	"github.com/lanes-qos/lanes/events"

	"golang.org/x/net/bpf"
)

// ListenProcExecExit is ListenProc for a reader that wants only execs and
// the exits of whole processes: a socket filter makes the kernel drop
// fork events, the exits of threads other than a process's main thread and
// the other kinds (uid, gid, comm, ptrace, ...) before they are queued, so
// that a process storm costs the reader one wake-up and one parse per
// exec and per exit, not per fork and per thread. Where the filter cannot
// be attached, every event arrives, as with ListenProc.
func ListenProcExecExit(logf func(format string, args ...any)) (*ProcConnector, error) {
	return listenProcFiltered(logf, recvBuffer, eventBuffer, execExitFilter(), nil)
}

// PublishProcExecExit is ListenProcExecExit publishing on bus instead of
// the Events channel (which stays empty): proc.exec, proc.exit and
// proc.overflow (Event.BusEvent), from the connector's own receive loop,
// without a hop through a channel and another goroutine.
func PublishProcExecExit(bus *events.Bus, logf func(format string, args ...any)) (*ProcConnector, error) {
	return listenProcFiltered(logf, recvBuffer, 1, execExitFilter(), bus)
}

// execExitFilter is a classic BPF socket filter over one netlink message
// of the proc connector: nlmsghdr (16 bytes), cn_msg (20), proc_event
// (what at 36, then cpu and timestamp; event data at 52). It keeps every
// message that is not the connector's (type NLMSG_DONE), acknowledgements
// (what = 0), execs, and exits whose pid is their tgid.
func execExitFilter() []bpf.RawInstruction {
	const (
		offType   = 4  // nlmsghdr.nlmsg_type, u16
		offWhat   = 36 // proc_event.what, u32
		offPID    = 52 // event_data.exit.process_pid
		offTGID   = 56 // event_data.exit.process_tgid
		nlmsgDone = 3
	)
	// Loads of BPF_ABS read big-endian; the connector writes in the
	// host's order.
	w := func(v uint32) uint32 {
		var b [4]byte
		binary.NativeEndian.PutUint32(b[:], v)
		return binary.BigEndian.Uint32(b[:])
	}
	h := func(v uint16) uint32 {
		var b [2]byte
		binary.NativeEndian.PutUint16(b[:], v)
		return uint32(binary.BigEndian.Uint16(b[:]))
	}
	const keep, drop = 0xffff, 0
	prog := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: offType, Size: 2},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: h(nlmsgDone), SkipFalse: 9}, // not a connector message: 11
		/* 2 */ bpf.LoadAbsolute{Off: offWhat, Size: 4},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(procEventExec), SkipTrue: 7}, // 11
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(procEventNone), SkipTrue: 6}, // 11
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(procEventExit), SkipFalse: 6}, // 12
		/* 6 */ bpf.LoadAbsolute{Off: offTGID, Size: 4},
		/* 7 */ bpf.StoreScratch{Src: bpf.RegA, N: 0},
		/* 8 */ bpf.LoadScratch{Dst: bpf.RegX, N: 0},
		/* 9 */ bpf.LoadAbsolute{Off: offPID, Size: 4},
		/* 10 */ bpf.JumpIfX{Cond: bpf.JumpNotEqual, SkipTrue: 1}, // 12
		/* 11 */ bpf.RetConstant{Val: keep},
		/* 12 */ bpf.RetConstant{Val: drop},
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		panic("proc connector filter: " + err.Error()) // a constant program
	}
	return raw
}
