package monitor

import (
	"fmt"

	"github.com/lanes-qos/lanes/events"
)

// EventKind says what happened to a process.
type EventKind int

const (
	// Fork: a process or thread was created (PID, TGID: the child;
	// ParentPID, ParentTGID: its parent). A new thread has PID != TGID.
	Fork EventKind = iota + 1
	// Exec: the thread group TGID executed a new program.
	Exec
	// Exit: a thread exited (ExitCode holds its wait status); when
	// PID == TGID the whole process has gone.
	Exit
	// Overflow: events were lost (the socket's receive buffer overflowed).
	// The consumer should rescan /proc.
	Overflow
)

func (k EventKind) String() string {
	switch k {
	case Fork:
		return "fork"
	case Exec:
		return "exec"
	case Exit:
		return "exit"
	case Overflow:
		return "overflow"
	default:
		return fmt.Sprintf("EventKind(%d)", int(k))
	}
}

// Event is one process event.
type Event struct {
	Kind EventKind
	// PID is the thread id, TGID the process id (thread group id).
	PID, TGID int
	// ParentPID and ParentTGID are the parent's (fork and exit events of
	// the proc connector; zero from the polling fallback).
	ParentPID, ParentTGID int
	// ExitCode is the exit event's wait status as wait(2) reports it: the
	// exit status in bits 8..15, the terminating signal in bits 0..6.
	ExitCode int
}

func (e Event) String() string {
	switch e.Kind {
	case Fork:
		return fmt.Sprintf("fork %d/%d -> %d/%d", e.ParentTGID, e.ParentPID, e.TGID, e.PID)
	case Exit:
		return fmt.Sprintf("exit %d/%d status %#x", e.TGID, e.PID, e.ExitCode)
	case Overflow:
		return "overflow"
	default:
		return fmt.Sprintf("%s %d/%d", e.Kind, e.TGID, e.PID)
	}
}

// ProcSource is the Source of process events on the bus.
const ProcSource = "monitor/proc"

// Topics of process events on the bus.
const (
	TopicExec     = "proc.exec"
	TopicExit     = "proc.exit"
	TopicFork     = "proc.fork"
	TopicOverflow = "proc.overflow"
)

// BusEvent is the process event as a bus event: proc.exec (payload pid),
// proc.exit of a whole process (pid, ppid: its parent's, 0 when the
// kernel did not say), proc.fork of a new process (pid: the child's,
// ppid: the parent process's), proc.overflow (no payload: events were
// lost, rescan /proc). PIDs are int64. The forks and exits of threads have
// no bus event (ok false).
func (e Event) BusEvent() (ev events.Event, ok bool) {
	switch e.Kind {
	case Fork:
		if e.PID != e.TGID {
			return events.Event{}, false
		}
		return events.Event{Source: ProcSource, Topic: TopicFork, Payload: map[string]any{
			"pid": int64(e.TGID), "ppid": int64(e.ParentTGID)}}, true
	case Exec:
		return events.Event{Source: ProcSource, Topic: TopicExec, Payload: map[string]any{"pid": int64(e.TGID)}}, true
	case Exit:
		if e.PID != e.TGID {
			return events.Event{}, false
		}
		return events.Event{Source: ProcSource, Topic: TopicExit, Payload: map[string]any{
			"pid": int64(e.TGID), "ppid": int64(e.ParentTGID)}}, true
	case Overflow:
		return events.Event{Source: ProcSource, Topic: TopicOverflow}, true
	}
	return events.Event{}, false
}

// PID returns a process event's pid from its payload (0 when missing).
func PID(ev events.Event) int {
	pid, _ := ev.Payload["pid"].(int64)
	return int(pid)
}
