package monitor

import "fmt"

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
