package e2e

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// notifySocket is a $NOTIFY_SOCKET as systemd opens one for a
// Type=notify service: a datagram socket collecting the daemon's state
// messages with when they came.
type notifySocket struct {
	path string
	conn *net.UnixConn
	mu   sync.Mutex
	msgs []notifyMsg
}

type notifyMsg struct {
	at   time.Time
	text string
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	n := &notifySocket{path: filepath.Join(t.TempDir(), "notify.sock")}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	n.conn = c
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, notifyMsg{time.Now(), string(buf[:k])})
			n.mu.Unlock()
		}
	}()
	return n
}

// since returns the messages that came after t.
func (n *notifySocket) since(t time.Time) []notifyMsg {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []notifyMsg
	for _, m := range n.msgs {
		if m.at.After(t) {
			out = append(out, m)
		}
	}
	return out
}

// count is how many messages since t hold the line.
func (n *notifySocket) count(t time.Time, line string) int {
	c := 0
	for _, m := range n.since(t) {
		for _, l := range strings.Split(m.text, "\n") {
			if l == line {
				c++
			}
		}
	}
	return c
}

// lanesd speaks systemd's notify protocol: READY=1 once it serves,
// RELOADING=1 (with MONOTONIC_USEC) then READY=1 around a reload, the
// watchdog petted at half its interval, and STOPPING=1. With the debug
// hook, SIGUSR2 stops the main loop: the API still answers but the pets
// stop, which is what systemd's watchdog acts on; a new lanesd after the
// kill adopts what the hung one left.
func TestSystemdNotify(t *testing.T) {
	e := newEnv(t, "")
	ns := newNotifySocket(t)
	const wd = 400 * time.Millisecond
	e.env = []string{"NOTIFY_SOCKET=" + ns.path, "WATCHDOG_USEC=" + strconv.Itoa(int(wd/time.Microsecond)), "LANESD_DEBUG_HOOKS=1"}
	t0 := time.Now()
	e.start()
	waitFor(t, 5*time.Second, "READY=1", func() bool { return ns.count(t0, "READY=1") == 1 })
	if !e.logged("watchdog") {
		t.Errorf("lanesd does not log its watchdog interval:\n%s", e.log)
	}
	// Half the interval: 5 pets in a second, 3 with a loaded host's slack
	// (1 under emulation, where timers run late).
	t1 := time.Now()
	time.Sleep(time.Second)
	least := 3
	if testutil.Emulated() {
		least = 1
	}
	if n := ns.count(t1, "WATCHDOG=1"); n < least {
		t.Errorf("%d watchdog pets in 1s at WATCHDOG_USEC=%v, want about 5", n, wd)
	}

	t2 := time.Now()
	e.d.Process.Signal(syscall.SIGHUP)
	waitFor(t, 10*time.Second, "RELOADING=1 then READY=1", func() bool {
		var reloading, ready bool
		for _, m := range ns.since(t2) {
			if strings.HasPrefix(m.text, "RELOADING=1\nMONOTONIC_USEC=") {
				reloading = true
			}
			if reloading && strings.HasPrefix(m.text, "READY=1") {
				ready = true
			}
		}
		return ready
	})

	p := spawnMovable(t, "sleep", "60")
	if r := e.lanes("move", strconv.Itoa(p.Process.Pid), "background"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	e.d.Process.Signal(syscall.SIGUSR2)
	waitFor(t, 5*time.Second, "the hook's log line", func() bool { return strings.Contains(e.log.String(), "debug hook") })
	// A pet sent before the hook may still be on its way to the reader.
	time.Sleep(100 * time.Millisecond)
	t3 := time.Now()
	time.Sleep(3 * wd)
	if n := ns.count(t3, "WATCHDOG=1"); n != 0 {
		t.Errorf("%d watchdog pets after the main loop stopped, want none", n)
	}
	var st api.Status
	e.lanesJSON(&st, "status") // the API still answers: only the watchdog tells
	// What systemd does when the pets stop: kill and start again.
	e.kill9()
	e.env = e.env[:1] // NOTIFY_SOCKET only: no watchdog, no hooks
	t4 := time.Now()
	e.start()
	waitFor(t, 5*time.Second, "READY=1 of the new lanesd", func() bool { return ns.count(t4, "READY=1") == 1 })
	if got := laneOf(t, p.Process.Pid); got != "lanes-background" {
		t.Errorf("after the restart the moved process is in %q, want lanes-background", got)
	}
	var ps api.ProcsResponse
	e.lanesJSON(&ps, "ps")
	adopted := false
	for _, pr := range ps.Procs {
		adopted = adopted || (pr.PID == p.Process.Pid && pr.Why == "move")
	}
	if !adopted {
		t.Errorf("the new lanesd does not list the moved process as moved: %+v", ps.Procs)
	}
	if n := ns.count(t4, "WATCHDOG=1"); n != 0 {
		t.Errorf("%d watchdog pets without WATCHDOG_USEC", n)
	}
	t5 := time.Now()
	e.stop()
	if ns.count(t5, "STOPPING=1") != 1 {
		t.Errorf("no STOPPING=1 at stop: %+v", ns.since(t5))
	}
	noLanesObjects(t)
}
