package monitor

import (
	"encoding/binary"
	"fmt"

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
	return listenProcFiltered(logf, recvBuffer, eventBuffer, execExitFilter(false), nil)
}

// PublishProcEvents is ListenProcExecExit publishing on bus instead of
// the Events channel (which stays empty): proc.exec, proc.exit and
// proc.overflow (Event.BusEvent), from the connector's own receive loop,
// without a hop through a channel and another goroutine; and proc.fork
// (new processes, not threads) while a subscription's patterns match it:
// the connector follows the bus's subscriptions (Bus.OnChange) and swaps
// its socket filter, so that nobody pays for forks nobody reads.
func PublishProcEvents(bus *events.Bus, logf func(format string, args ...any)) (*ProcConnector, error) {
	p, err := listenProcFiltered(logf, recvBuffer, 1, execExitFilter(false), bus)
	if err != nil {
		return nil, err
	}
	follow := func() {
		if err := p.SetForks(bus.Interested(TopicFork)); err != nil {
			logf("proc connector: %v", err)
		}
	}
	p.stopFollow = bus.OnChange(follow)
	follow()
	return p, nil
}

// SetForks turns the publishing of process forks (proc.fork) on or off:
// the socket filter passes them or drops them in the kernel. Where no
// filter could be attached every fork arrives anyway and only the
// publishing changes.
func (p *ProcConnector) SetForks(on bool) error {
	p.forkMu.Lock()
	defer p.forkMu.Unlock()
	if p.forks.Load() == on {
		return nil
	}
	if p.filtered {
		if err := p.conn.SetBPF(execExitFilter(on)); err != nil {
			return fmt.Errorf("set the event filter (forks %v): %w", on, err)
		}
	}
	p.forks.Store(on)
	return nil
}

// execExitFilter is a classic BPF socket filter over one netlink message
// of the proc connector: nlmsghdr (16 bytes), cn_msg (20), proc_event
// (what at 36, then cpu and timestamp; event data at 52). It keeps every
// message that is not the connector's (type NLMSG_DONE), acknowledgements
// (what = 0), execs, exits whose pid is their tgid, and with forks the
// forks whose child's pid is its tgid (a process, not a thread).
func execExitFilter(forks bool) []bpf.RawInstruction {
	const (
		offType      = 4  // nlmsghdr.nlmsg_type, u16
		offWhat      = 36 // proc_event.what, u32
		offPID       = 52 // event_data.exit.process_pid
		offTGID      = 56 // event_data.exit.process_tgid
		offChildPID  = 60 // event_data.fork.child_pid
		offChildTGID = 64 // event_data.fork.child_tgid
		nlmsgDone    = 3
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
	// A fork goes to the child check (11) or is dropped (16).
	forkSkip := uint8(10)
	if forks {
		forkSkip = 5
	}
	prog := []bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: offType, Size: 2},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: h(nlmsgDone), SkipFalse: 13}, // not a connector message: 15
		/* 2 */ bpf.LoadAbsolute{Off: offWhat, Size: 4},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(procEventExec), SkipTrue: 11}, // 15
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(procEventNone), SkipTrue: 10}, // 15
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(procEventFork), SkipTrue: forkSkip}, // 11 or 16
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: w(procEventExit), SkipFalse: 9}, // 16
		/* 7 */ bpf.LoadAbsolute{Off: offTGID, Size: 4},
		/* 8 */ bpf.TAX{},
		/* 9 */ bpf.LoadAbsolute{Off: offPID, Size: 4},
		/* 10 */ bpf.JumpIfX{Cond: bpf.JumpEqual, SkipTrue: 4, SkipFalse: 5}, // 15, 16
		/* 11 */ bpf.LoadAbsolute{Off: offChildTGID, Size: 4},
		/* 12 */ bpf.TAX{},
		/* 13 */ bpf.LoadAbsolute{Off: offChildPID, Size: 4},
		/* 14 */ bpf.JumpIfX{Cond: bpf.JumpEqual, SkipTrue: 0, SkipFalse: 1}, // 15, 16
		/* 15 */ bpf.RetConstant{Val: keep},
		/* 16 */ bpf.RetConstant{Val: drop},
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		panic("proc connector filter: " + err.Error()) // a constant program
	}
	return raw
}
