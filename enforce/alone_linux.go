package enforce

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/paths"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// Alone runs a command in a lane without a daemon: it creates a private
// group (lanes-run-<pid>-<lane>) with the lane's settings, starts the
// command inside it, and Finish removes everything it created once the
// command is done. The caller waits for the command and forwards signals.
type Alone struct {
	eng      *Engine
	store    *state.Store
	stateDir string
	group    cgroup.Group
	orig     cgroup.Membership
	lane     *lane.Lane
}

// RunDir holds the state of daemon-less runs (tmpfs on most hosts).
const RunDir = paths.RunDir

// StartAlone starts cmd in lane l. Processes the command forks stay in the
// lane; ones that outlive it are moved back to where `lanes run` was.
func StartAlone(l *lane.Lane, cmd *exec.Cmd, logf func(string, ...any)) (*Alone, error) {
	if l.CPU.ReservePercent > 0 {
		// A reservation is a controller in lanesd (the guarantee, and
		// idle CPU beyond it); without lanesd the lane is an ordinary one.
		c := *l
		c.CPU.ReservePercent, c.CPU.ReservePeriod = 0, 0
		if logf != nil {
			logf("lane %s: cpu.reserve needs lanesd; without it the command runs at the lane's CPU weight, unreserved", l.Name)
		}
		l = &c
	}
	self := os.Getpid()
	dir := filepath.Join(RunDir, "run-"+strconv.Itoa(self))
	store, err := state.Open(dir)
	if err != nil {
		return nil, err
	}
	a := &Alone{store: store, stateDir: dir, lane: l}
	prefix := RunGroupPrefix + strconv.Itoa(self) + "-"
	a.eng, err = New(Options{Store: store, Logf: logf, GroupName: func(n string) string { return prefix + n }})
	if err != nil {
		a.close()
		return nil, err
	}
	if a.group, err = a.eng.EnsureLane(l); err != nil {
		a.Finish()
		return nil, err
	}
	if a.orig, err = cgroup.ProcMembership(self); err != nil {
		a.Finish()
		return nil, err
	}
	// The child inherits the group, the I/O priority and the scheduling
	// policy of the thread that forks it: take them on for the fork, then
	// give them back.
	if err := a.group.AddProc(self); err != nil {
		a.Finish()
		return nil, err
	}
	saved, ioErr := disk.ApplyProcess(self, l.Disk)
	cpuErr := a.eng.CPU.JoinThreads(self, l.CPU)
	var startErr error
	if ioErr == nil && cpuErr == nil {
		startErr = cmd.Start()
	}
	a.eng.CPU.JoinThreads(self, lane.CPU{})
	disk.RestoreProcess(self, saved)
	restoreErr := a.eng.H.Restore(self, a.orig)
	for _, err := range []error{ioErr, cpuErr, startErr, restoreErr} {
		if err != nil {
			if cmd.Process != nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
			a.Finish()
			return nil, err
		}
	}
	return a, nil
}

// Finish moves processes that outlived the command back to where `lanes
// run` was, removes the private group and the run's state.
func (a *Alone) Finish() error {
	var err error
	if a.eng != nil && a.group.Exists() {
		if pids, perr := a.group.Procs(); perr == nil {
			for _, pid := range pids {
				a.eng.H.Restore(pid, a.orig)
			}
		}
		err = a.eng.ReleaseLane(a.group.Name(), nil)
		// Controllers this run enabled go off again unless other lanes
		// groups (a daemon's, another run's) still use them.
		if others, lerr := a.eng.H.ListGroups(cgroup.Prefix); err == nil && lerr == nil && len(others) == 0 {
			err = a.eng.H.Undo()
		}
	}
	a.close()
	if err != nil {
		return fmt.Errorf("clean up lane %s: %w", a.lane.Name, err)
	}
	return nil
}

func (a *Alone) close() {
	if a.store != nil {
		a.store.Close()
		a.store = nil
	}
	os.RemoveAll(a.stateDir)
}
