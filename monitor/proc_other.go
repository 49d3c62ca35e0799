//go:build !linux

package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
)

// ProcConnector receives process events; Linux only.
type ProcConnector struct{}

var errNoProc = fmt.Errorf("process events need Linux's proc connector and /proc: %w", errors.ErrUnsupported)

// ListenProc fails: the proc connector is Linux-only.
func ListenProc(logf func(format string, args ...any)) (*ProcConnector, error) {
	return nil, fmt.Errorf("listen proc connector: %w", errNoProc)
}

// Events returns a closed channel.
func (p *ProcConnector) Events() <-chan Event {
	ch := make(chan Event)
	close(ch)
	return ch
}

// Err reports that the connector is unsupported.
func (p *ProcConnector) Err() error { return errNoProc }

// Close does nothing.
func (p *ProcConnector) Close() error { return nil }

// PollProcs returns a channel that closes when ctx is done: there is no
// /proc to poll.
func PollProcs(ctx context.Context, interval time.Duration) <-chan Event {
	ch := make(chan Event)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch
}

// Scan fails: it reads /proc.
func Scan() ([]lane.Process, error) {
	return nil, fmt.Errorf("scan processes: %w", errNoProc)
}

// ReadProcess fails: it reads /proc.
func ReadProcess(pid int) (lane.Process, error) {
	return lane.Process{PID: pid}, fmt.Errorf("read process %d: %w", pid, errNoProc)
}

// ReadProcessCgroup fails: it reads /proc.
func ReadProcessCgroup(pid int) (lane.Process, []byte, error) {
	return lane.Process{PID: pid}, nil, fmt.Errorf("read process %d: %w", pid, errNoProc)
}

// ListenProcExecExit fails: the proc connector is Linux-only.
func ListenProcExecExit(logf func(format string, args ...any)) (*ProcConnector, error) {
	return ListenProc(logf)
}

// PublishProcEvents fails: the proc connector is Linux-only.
func PublishProcEvents(bus *events.Bus, logf func(format string, args ...any)) (*ProcConnector, error) {
	return ListenProc(logf)
}

// SetForks does nothing: the proc connector is Linux-only.
func (p *ProcConnector) SetForks(on bool) error { return errNoProc }
