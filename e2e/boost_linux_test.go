package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// niceOf reads a process's nice value: field 19 of /proc/PID/stat.
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name's closing parenthesis start at 3.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.Atoi(f[19-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sliceOf reads a thread's EEVDF slice (sched_getattr's sched_runtime).
func sliceOf(t *testing.T, tid int) time.Duration {
	t.Helper()
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(attr.Runtime)
}

// waitNice waits up to 5 s for a process's nice value to become want;
// on failure it shows lanesd's log.
func (e *env) waitNice(pid, want int, why string) {
	e.t.Helper()
	got := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = niceOf(e.t, pid); got == want {
			return
		}
	}
	e.t.Fatalf("%s: pid %d at nice %d, want %d\nlanesd's log:\n%s", why, pid, got, want, e.log)
}

// Priority boosting (seed 000) on real processes: in a lane with an INCR
// policy, an upload's process is boosted when a contact begins (from the
// API, then from the host's connectivity: a default route appearing in
// lanesd's namespace) and gets its own nice back when it ends; a process
// of the lane that does not communicate is left alone; stopping lanesd
// undoes a boost; bad contact requests change nothing. Where the kernel
// has custom slices the boost also gives the upload a 200 µs slice and
// every undoing gives the kernel's default back; where it has none,
// lanesd says it boosts nice only.
func TestBoostContact(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed")
	}
	p := newNetPair(t)
	e := newEnv(t, `[lanes.sync.boost]
policy = "incr"
initial = -1
final = -5
step = "events"
every = 20
slice = "200us"

[lanes.spare.boost]
policy = "static"
initial = -3
`)
	e.startIn(p)
	// The upload must outlast the test, three restarts of lanesd
	// included: many times longer under emulation (the kernel matrix),
	// where an upload that had ended stayed a zombie at its boost.
	secs := 20
	if testutil.Emulated() {
		secs = 600
	}
	up := p.upload(t, 5311, secs, "")
	defSlice, sliceErr := cpu.DefaultSlice()
	// checkSlice checks the upload's slice: boosted or not.
	checkSlice := func(boosted bool, when string) {
		t.Helper()
		if sliceErr != nil {
			return
		}
		want := defSlice
		if boosted {
			want = 200 * time.Microsecond
		}
		if got := sliceOf(t, up.Process.Pid); got != want {
			t.Errorf("%s: the upload's slice is %v, want %v", when, got, want)
		}
	}
	quiet := spawn(t, nil, "sleep", strconv.Itoa(3*secs))
	if r := e.lanes("move", strconv.Itoa(up.Process.Pid), strconv.Itoa(quiet.Process.Pid), "sync"); r.code != 0 {
		t.Fatalf("lanes move: %d %s", r.code, r.stderr)
	}
	time.Sleep(300 * time.Millisecond)
	if n := niceOf(t, up.Process.Pid); n != 0 {
		t.Fatalf("upload at nice %d before any contact (no default route in the namespace), want 0", n)
	}

	// Bad requests: nothing changes.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"contact", "up", "--lane", "normal"}, "lane normal has no boost policy"},
		{[]string{"contact", "up", "--lane", "nosuch"}, `unknown lane "nosuch"`},
		{[]string{"contact", "up", "--lane", "spare"}, "lane spare has no processes to boost"},
		{[]string{"contact", "sideways"}, `"sideways": want up or down`},
	} {
		r := e.lanes(c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("lanes %v: exit %d %q, want exit 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := niceOf(t, up.Process.Pid); n != 0 {
		t.Fatalf("upload at nice %d after refused requests, want 0", n)
	}

	// A contact from the API: the upload climbs to -5 (a step per 20
	// data segments); the quiet process stays.
	if r := e.lanes("contact", "up", "--lane", "sync"); r.code != 0 || !strings.Contains(r.stdout, "contact up for sync") {
		t.Fatalf("lanes contact up: %d %q %q", r.code, r.stdout, r.stderr)
	}
	e.waitNice(up.Process.Pid, -5, "in contact")
	checkSlice(true, "in contact")
	if n := niceOf(t, quiet.Process.Pid); n != 0 {
		t.Errorf("a process without traffic boosted to nice %d", n)
	}
	var st api.Status
	e.lanesJSON(&st, "status")
	if len(st.Boost) != 2 || st.Boost[0].Lane != "sync" || !st.Boost[0].Contact || len(st.Boost[0].Boosted) != 1 ||
		st.Boost[0].Boosted[0].PID != up.Process.Pid || st.Boost[0].Boosted[0].Nice != -5 || st.Boost[1].Contact {
		t.Errorf("status boost %+v, want sync in contact with the upload at -5, spare not in contact", st.Boost)
	}
	if out := e.lanes("status").stdout; !strings.Contains(out, "sync: incr: nice -1 to -5, a step every 20 events") {
		t.Errorf("lanes status does not show the policy:\n%s", out)
	}
	if out := e.lanes("doctor").stdout; !strings.Contains(out, "boost: who communicates") {
		t.Errorf("lanes doctor does not say how boosting counts traffic:\n%s", out)
	}
	if r := e.lanes("contact", "down"); r.code != 0 || !strings.Contains(r.stdout, "1 process(es) got their own priority back") {
		t.Fatalf("lanes contact down: %d %q %q", r.code, r.stdout, r.stderr)
	}
	e.waitNice(up.Process.Pid, 0, "contact over (reset)")
	checkSlice(false, "contact over (reset)")

	// A contact from connectivity: a default route through the veth.
	route := func(op string) {
		if out, err := exec.Command("ip", "-n", p.ns, "route", op, "default", "via", "198.18.99.2").CombinedOutput(); err != nil {
			t.Fatalf("ip route %s: %v %s", op, err, out)
		}
	}
	route("add")
	e.waitNice(up.Process.Pid, -5, "connectivity up")
	route("del")
	e.waitNice(up.Process.Pid, 0, "connectivity down")

	// Stopping lanesd undoes a boost.
	route("add")
	e.waitNice(up.Process.Pid, -5, "connectivity up again")
	e.stop()
	if n := niceOf(t, up.Process.Pid); n != 0 {
		t.Errorf("after lanesd stopped the upload is at nice %d, want its own 0", n)
	}
	checkSlice(false, "after lanesd stopped")
	if sliceErr != nil && !strings.Contains(e.log.String(), "boost: lane sync: slice 200µs") {
		t.Errorf("the kernel has no custom slices (%v), and lanesd's log does not say it boosts nice only", sliceErr)
	}
	for _, want := range []string{"boost: sync (incr", "contact up for sync (reported by uid 0", "network: connectivity up"} {
		if !strings.Contains(e.log.String(), want) {
			t.Errorf("lanesd's log lacks %q", want)
		}
	}

	// A crash leaves the boost; the next lanesd gives it back from its
	// record (the route gone meanwhile: no contact when it starts).
	e.startIn(p)
	if r := e.lanes("move", strconv.Itoa(up.Process.Pid), "sync"); r.code != 0 { // the stop put it back
		t.Fatalf("lanes move: %d %s", r.code, r.stderr)
	}
	e.waitNice(up.Process.Pid, -5, "connectivity up at start")
	e.kill9()
	if n := niceOf(t, up.Process.Pid); n != -5 {
		t.Fatalf("after lanesd was killed the upload is at nice %d, want the boost -5 left", n)
	}
	checkSlice(true, "after lanesd was killed")
	route("del")
	if st := procState(up.Process.Pid); st == "" || st == "Z" || st == "X" {
		t.Fatalf("the upload is in state %q before the restart: it must still run for the test to mean anything", st)
	}
	e.startIn(p)
	if n := niceOf(t, up.Process.Pid); n != 0 {
		t.Errorf("after a restart the upload is at nice %d, want its own 0 back", n)
	}
	checkSlice(false, "after a restart")
	if !e.logged("gave 1 processes boosted by an earlier lanesd their own nice values back") {
		t.Errorf("lanesd's log does not say it gave the boost back:\n%s", e.log)
	}
	e.stop()
}

// from = "start": a process that starts during a contact, or while the
// link is down before it, is boosted before it has any traffic; one of
// the lane that started before lanesd (so before the link was known to
// be down) and does not communicate is left alone; the contact's end
// gives the boosted their own nice back, and the next contact boosts
// them again, with a process started in the down period between. A
// reload while the link is down keeps the window.
func TestBoostFromStart(t *testing.T) {
	const fromStart = `[lanes.sync.boost]
policy = "static"
initial = -7
from = "start"
`
	e := newEnv(t, fromStart)
	// The sleepers outlast the test (killed when it ends), under
	// emulation too.
	early := sleeper(t, 120)
	time.Sleep(300 * time.Millisecond) // its start well before lanesd's
	// In a namespace of its own, without a default route: no contact
	// until the test makes one.
	e.startIn(newNetPair(t))
	move := func(c *exec.Cmd) {
		t.Helper()
		if r := e.lanes("move", strconv.Itoa(c.Process.Pid), "sync"); r.code != 0 {
			t.Fatalf("lanes move: %d %s", r.code, r.stderr)
		}
	}
	contact := func(state string) {
		t.Helper()
		if r := e.lanes("contact", state); r.code != 0 {
			t.Fatalf("lanes contact %s: %d %q %q", state, r.code, r.stdout, r.stderr)
		}
	}
	move(early)
	waiting := sleeper(t, 120) // started while lanesd waits for a contact
	move(waiting)
	time.Sleep(300 * time.Millisecond)
	if n := niceOf(t, waiting.Process.Pid); n != 0 {
		t.Errorf("before any contact a process is at nice %d, want 0", n)
	}
	// A reload while the link is down keeps the window the started
	// processes count in: the one started before it still counts. (The
	// new level shows that the reload took effect.)
	e.writeConfig(strings.Replace(fromStart, "initial = -7", "initial = -8", 1))
	if r := e.lanes("reload"); r.code != 0 {
		t.Fatalf("lanes reload: %d %s", r.code, r.stderr)
	}
	contact("up")
	e.waitNice(waiting.Process.Pid, -8, "started while the link was down, before a reload, at the contact")
	late := sleeper(t, 120)
	move(late)
	e.waitNice(late.Process.Pid, -8, "started in the contact")
	if n := niceOf(t, early.Process.Pid); n != 0 {
		t.Errorf("a process started before lanesd, without traffic, is at nice %d, want 0", n)
	}
	if out := e.lanes("status").stdout; !strings.Contains(out, "processes started in a contact or while the link was down before it, from their start") {
		t.Errorf("lanes status does not show from = start:\n%s", out)
	}
	contact("down")
	e.waitNice(late.Process.Pid, 0, "contact over")
	e.waitNice(waiting.Process.Pid, 0, "contact over")
	between := sleeper(t, 120)
	move(between)
	time.Sleep(300 * time.Millisecond)
	contact("up")
	e.waitNice(late.Process.Pid, -8, "the next contact, without traffic")
	e.waitNice(between.Process.Pid, -8, "started between the contacts")
	time.Sleep(time.Second)
	if n := niceOf(t, early.Process.Pid); n != 0 {
		t.Errorf("in the next contact a process started before lanesd, without traffic, is at nice %d, want 0", n)
	}
	e.stop()
}

// sleeper starts this test binary as a process that sleeps secs (the
// role, not sleep(1): busybox's in the kernel matrix's guests).
func sleeper(t *testing.T, secs int) *exec.Cmd {
	t.Helper()
	c := exec.Command(testBin(t), strconv.Itoa(secs))
	c.Env = append(os.Environ(), roleEnv+"=sleep")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}
