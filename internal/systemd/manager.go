package systemd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"

	"github.com/lanes-qos/lanes/internal/cgroup"
)

// callTimeout bounds every request to systemd and the job it starts (a
// slow, emulated machine starts a scope in well under a second).
const callTimeout = 30 * time.Second

// Manager is a connection to systemd's unit manager. It implements
// cgroup.Units. Safe for concurrent use.
type Manager struct {
	conn *sddbus.Conn
	// Via says how it is connected: systemd's private socket (root,
	// needs no bus daemon) or the system bus.
	Via string
}

// Connect connects to systemd: its private socket where this process may
// use it (root), else the system bus.
func Connect(ctx context.Context) (*Manager, error) {
	type result struct {
		m   *Manager
		err error
	}
	// The connection lives as long as ctx (godbus closes it when ctx is
	// done), so the time limit is kept here: a systemd that does not
	// answer its socket must not hold lanesd's start.
	done := make(chan result, 1)
	go func() {
		conn, err := sddbus.NewSystemdConnectionContext(ctx)
		if err == nil {
			done <- result{m: &Manager{conn: conn, Via: "systemd's private socket /run/systemd/private"}}
			return
		}
		conn, err2 := sddbus.NewSystemConnectionContext(ctx)
		if err2 != nil {
			done <- result{err: fmt.Errorf("connect to systemd: private socket: %v; system bus: %w", err, err2)}
			return
		}
		done <- result{m: &Manager{conn: conn, Via: "the system bus"}}
	}()
	select {
	case r := <-done:
		return r.m, r.err
	case <-time.After(callTimeout):
		go func() { // close what comes too late
			if r := <-done; r.m != nil {
				r.m.Close()
			}
		}()
		return nil, fmt.Errorf("connect to systemd: no answer within %s", callTimeout)
	}
}

// Close closes the connection.
func (m *Manager) Close() { m.conn.Close() }

// ActiveState is a unit's ActiveState ("active", "inactive", ...).
func (m *Manager) ActiveState(unit string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	p, err := m.conn.GetUnitPropertyContext(ctx, unit, "ActiveState")
	if err != nil {
		return "", fmt.Errorf("state of %s: %w", unit, err)
	}
	s, _ := p.Value.Value().(string)
	return s, nil
}

// EnsureSlice starts the transient slice unless it is active.
func (m *Manager) EnsureSlice(slice string) (bool, error) {
	if st, err := m.ActiveState(slice); err == nil && st == "active" {
		return false, nil
	}
	props := []sddbus.Property{sddbus.PropDescription("lanes: the lane " + laneOf(slice))}
	if err := m.startTransient(slice, props); err != nil {
		return false, err
	}
	return true, nil
}

// StartScope starts a transient scope in slice holding pid. Systemd
// forgets it once its processes have exited, failed or not
// (CollectMode=inactive-or-failed), so the name is free again.
func (m *Manager) StartScope(scope, slice string, pid int) error {
	props := []sddbus.Property{
		sddbus.PropSlice(slice),
		sddbus.PropPids(uint32(pid)),
		sddbus.PropDescription("lanes: processes of the lane " + laneOf(slice)),
		{Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")},
	}
	return m.startTransient(scope, props)
}

func (m *Manager) startTransient(unit string, props []sddbus.Property) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ch := make(chan string, 1)
	if _, err := m.conn.StartTransientUnitContext(ctx, unit, "fail", props, ch); err != nil {
		return fmt.Errorf("start %s: %w", unit, err)
	}
	return wait(ctx, "start "+unit, ch)
}

// Stop stops a unit and waits for the job; a unit systemd does not know
// is not an error.
func (m *Manager) Stop(unit string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ch := make(chan string, 1)
	if _, err := m.conn.StopUnitContext(ctx, unit, "replace", ch); err != nil {
		if isNoSuchUnit(err) {
			return nil
		}
		return fmt.Errorf("stop %s: %w", unit, err)
	}
	return wait(ctx, "stop "+unit, ch)
}

// SetCgroupFile sets the run-time property of unit that systemd writes to
// file (see Properties). ok is false where there is none, and where
// systemd refuses CPUWeight=idle (before version 252): the caller writes
// cpu.idle itself.
func (m *Manager) SetCgroupFile(unit, file, value string) (bool, error) {
	props, ok, err := Properties(file, value)
	if !ok || err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := m.conn.SetUnitPropertiesContext(ctx, unit, true, props...); err != nil {
		if file == "cpu.idle" && isInvalidArgs(err) {
			return false, nil
		}
		return false, fmt.Errorf("set %s of %s (for %s = %q): %w", propNames(props), unit, file, value, err)
	}
	return true, nil
}

// UnitOf is the unit systemd counts pid in.
func (m *Manager) UnitOf(pid int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	u, err := m.conn.GetUnitNameByPID(ctx, uint32(pid))
	if err != nil {
		return "", fmt.Errorf("unit of process %d: %w", pid, err)
	}
	return u, nil
}

func propNames(props []sddbus.Property) string {
	var names []string
	for _, p := range props {
		names = append(names, p.Name)
	}
	return strings.Join(names, ", ")
}

// wait waits for a job's result: "done" is success.
func wait(ctx context.Context, what string, ch <-chan string) error {
	select {
	case r := <-ch:
		if r != "done" {
			return fmt.Errorf("%s: job %s", what, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: no job result within %s", what, callTimeout)
	}
}

func dbusName(err error) string {
	var de godbus.Error
	if errors.As(err, &de) {
		return de.Name
	}
	var dp *godbus.Error
	if errors.As(err, &dp) {
		return dp.Name
	}
	return ""
}

func isNoSuchUnit(err error) bool {
	return dbusName(err) == "org.freedesktop.systemd1.NoSuchUnit"
}

func isInvalidArgs(err error) bool {
	return dbusName(err) == "org.freedesktop.DBus.Error.InvalidArgs"
}

// laneOf is the lane a slice of lanes is for, for descriptions: the name
// of the group it was made for without the "lanes-" ("background").
func laneOf(slice string) string {
	if g := cgroup.GroupOfPath(slice); g != "" {
		return strings.TrimPrefix(g, cgroup.Prefix)
	}
	return strings.TrimSuffix(slice, ".slice")
}
