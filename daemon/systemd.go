package daemon

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// systemd's service protocol (sd_notify(3)): lanesd says when it is ready,
// reloading and stopping, and pets the watchdog from its main loop, all
// through $NOTIFY_SOCKET; without one (not started by systemd with
// Type=notify) every call is a no-op.

// notify sends state lines to systemd, logging a failure.
func (d *Daemon) notify(state string) {
	if _, err := sd.SdNotify(false, state); err != nil {
		d.logf("sd_notify %q: %v", state, err)
	}
}

// notifyReloading is RELOADING=1 with the monotonic time systemd wants
// with it (Type=notify-reload).
func (d *Daemon) notifyReloading() {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		d.notify(sd.SdNotifyReloading)
		return
	}
	d.notify(fmt.Sprintf("%s\nMONOTONIC_USEC=%d", sd.SdNotifyReloading, ts.Nano()/1000))
}

// watchdog returns a channel that ticks at half the watchdog interval
// systemd asked for ($WATCHDOG_USEC, for this pid), or nil without one.
func watchdog() (<-chan time.Time, func(), time.Duration) {
	wd, err := sd.SdWatchdogEnabled(false)
	if err != nil || wd <= 0 {
		return nil, func() {}, 0
	}
	t := time.NewTicker(wd / 2)
	return t.C, t.Stop, wd
}

// alive tells whether the daemon can still change the kernel: applyMu,
// which every apply, reload and stop takes, is free within wait. A hung
// apply stops the watchdog's pets, and systemd restarts lanesd.
func (d *Daemon) alive(wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for !d.applyMu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.applyMu.Unlock()
	return true
}

// debugHangEnv enables the debug hook that stops the main loop on SIGUSR2
// (the watchdog's test: the API still answers, the loop does not).
const debugHangEnv = "LANESD_DEBUG_HOOKS"

// debugHang returns a channel that receives SIGUSR2 when the debug hooks
// are enabled, else nil.
func debugHang() (<-chan os.Signal, func()) {
	if os.Getenv(debugHangEnv) != "1" {
		return nil, func() {}
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	return ch, func() { signal.Stop(ch) }
}

const sdWatchdog = sd.SdNotifyWatchdog
