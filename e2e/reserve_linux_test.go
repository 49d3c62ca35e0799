package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// shares measures a process's CPU in n consecutive windows of about
// 100 ms, in percent of one CPU.
func shares(t *testing.T, pid, n int) []float64 {
	t.Helper()
	return testutil.CPUWindows(t, pid, n)
}

// unstolen says which windows the hypervisor took no time in, nor in the
// window after (the kernel counts stolen time at the first tick after it,
// which may fall in the next window).
func unstolen(stolen []time.Duration) []bool {
	ok := make([]bool, len(stolen))
	for i := range stolen {
		ok[i] = stolen[i] <= 0 && (i+1 == len(stolen) || stolen[i+1] <= 0)
	}
	return ok
}

func summary(xs []float64) string {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return fmt.Sprintf("min %.1f median %.1f max %.1f mean %.1f %%", s[0], s[len(s)/2], s[len(s)-1], sum/float64(len(s)))
}

// policyOf is a thread's scheduling policy as /proc/PID/sched shows it.
func policyOf(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/sched")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "policy" {
			p, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("/proc/%d/sched has no policy", tid)
	return 0
}

// busy starts a busy loop for at most secs seconds: the test binary
// spinning one goroutine (GOMAXPROCS=1; the Go runtime's other threads
// sleep).
func busy(t *testing.T, bin string, secs int) *exec.Cmd {
	t.Helper()
	c := exec.Command(bin)
	c.Env = append(os.Environ(), roleEnv+"=spin", "LANES_SPIN_SECONDS="+strconv.Itoa(secs), "GOMAXPROCS=1")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// CPU reservations (seed 001) on real busy loops: a lane reserving 20 %
// of a CPU gets a whole CPU when nothing competes, 20 % of a CPU in
// every 100 ms window against busy loops on every CPU, and a whole CPU
// again when they end; with each mechanism (CFS bandwidth, and
// SCHED_DEADLINE per thread), and with a reservation given as C/T.
// Stopping lanesd gives the threads their own policy back.
func TestReserve(t *testing.T) {
	ncpu := numCPU(t)
	// The test loads the host itself: whether it can measure is asked
	// before it starts.
	timing := testutil.TimingOK(t)
	// The kernel enforces a runtime or quota at its tick (without
	// HRTICK): a thread overruns by up to a tick and pays it back later,
	// so a 100 ms window may hold a tick more or less than its share.
	tick := 100 * tickSeconds(t) / 0.1
	// Mode changes take a few samples natively; under emulation, more.
	within := 3 * time.Second
	if testutil.Emulated() {
		within = 30 * time.Second
	}
	tests := []struct {
		name, reserve, mechanism string
		policy                   int // of the busy thread under the guarantee
	}{
		{"cfs 20%", "20%", "cfs", 0},
		{"deadline 20%", "20%", "deadline", 6},
		// A reservation given as C/T (here 2ms/10ms, the same share):
		// `lanes bench execspeed` measures the windows of one whose
		// period is the window (20ms/100ms), where a window may catch the
		// ends of two periods.
		{"cfs 2ms/10ms", "2ms/10ms", "cfs", 0},
	}
	// Where the kernel enforces deadline runtimes only at its tick (no
	// HRTICK_DL), lanes itself uses CFS bandwidth (auto), and the forced
	// deadline arm is known imprecise (docs/BENCHMARKS.md: 46 % of the
	// windows within ± 2): there it checks what lanesd does, not how
	// exactly the kernel holds the share.
	auto, err := cpu.ReserveMechanism("auto", "auto")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if testutil.Emulated() && tt.reserve != "20%" {
				// The C/T arm is the cfs arm's mechanism with another period:
				// under emulation (the kernel matrix), where lanesd's starts
				// take seconds and the shares are not asserted, it adds only
				// time.
				t.Skip("the same mechanism as cfs 20%; its windows are not asserted under emulation")
			}
			exact := tt.mechanism == "cfs" || auto.Preferred
			if tt.mechanism == "deadline" {
				deadlineRoom(t, 20)
			}
			if !exact {
				t.Logf("the busy thread's policy and the windows are not asserted: lanes does not choose SCHED_DEADLINE here (%s)", auto.Reason)
			}
			e := newEnv(t, "[lanes.rsv]\ncpu.reserve = \""+tt.reserve+"\"\n")
			// At debug level lanesd logs each thread it puts under
			// SCHED_DEADLINE and gives back: the log the check after stop
			// prints.
			e.startWith([]string{e.bin, "--reserve-mechanism", tt.mechanism, "--log-level", "debug"})
			loop := busy(t, e.bin, 60)
			pid := loop.Process.Pid
			if r := e.lanes("move", strconv.Itoa(pid), "rsv"); r.code != 0 {
				t.Fatalf("lanes move: %d %s", r.code, r.stderr)
			}
			mode := func() api.ReserveLane {
				var st api.Status
				e.lanesJSON(&st, "status")
				if len(st.Reserve) != 1 {
					t.Fatalf("status reserve %+v, want the lane rsv", st.Reserve)
				}
				return st.Reserve[0]
			}
			// reach waits for the lane's mode. Where lanes would not choose
			// the forced mechanism, the kernel may hold the thread under its
			// share or over it (under emulation it never reached its full
			// reservation in 30 s): the controller's modes are then only
			// logged, and what lanesd does with the threads still checked.
			reach := func(what, want string) {
				t.Helper()
				// Under emulation the host's idle time that sends a lane
				// beyond its reservation comes and goes with the guest's
				// load: the modes are logged there too.
				if exact && !testutil.Emulated() {
					waitFor(t, within, what, func() bool { return mode().Mode == want })
					return
				}
				// Not asserted: a shorter wait (the kernel matrix's time).
				logWait := min(within, 10*time.Second)
				if !pollFor(logWait, func() bool { return mode().Mode == want }) {
					t.Logf("not asserted: %s not reached in %v (%+v)", what, logWait, mode())
				}
			}
			reach("the lane to go beyond its reservation", "beyond")
			time.Sleep(300 * time.Millisecond)
			assistQuiet(t, e, within, exact)
			alone := shares(t, pid, 10)
			t.Logf("alone: %s", summary(alone))

			var hogs []*exec.Cmd
			for range 2 * ncpu {
				hogs = append(hogs, busy(t, e.bin, 30))
			}
			reach("the guarantee", "guarantee")
			// The deadline split settles on the busy thread within a few
			// samples of its use.
			time.Sleep(time.Second)
			before := mode().Changes
			var hogPIDs []int
			for _, h := range hogs {
				hogPIDs = append(hogPIDs, h.Process.Pid)
			}
			crowded, hogShares, stolen := testutil.CPUWindowsBeside(t, pid, hogPIDs, 30)
			judged := unstolen(stolen)
			rl := mode()
			// A window short of the share is a change of mode among them
			// (the controller sent the lane beyond its reservation while
			// the loops ran) or the kernel's enforcement: the count says
			// which.
			t.Logf("against %d busy loops: %s; %d mode changes during the windows; the loops together: %s; stolen by the hypervisor: %v", len(hogs), summary(crowded), rl.Changes-before, summary(hogShares), stolen)
			// Under CFS bandwidth the tick assist charges the quota every
			// millisecond where the kernel's tick is coarser: it runs while
			// the lane uses its reservation, and the windows are then held
			// to its period instead of the tick.
			grain := tick
			var st api.Status
			e.lanesJSON(&st, "status")
			a := st.ReserveAssist
			t.Logf("tick assist: %+v", a)
			switch {
			case rl.Mechanism == "CFS bandwidth" && a == nil:
				t.Errorf("under CFS bandwidth, no tick assist in status")
			case rl.Mechanism == "CFS bandwidth" && a.Error != "":
				// A kernel that refuses lanesd SCHED_FIFO (real-time group
				// scheduling with no runtime for lanesd's group): the
				// quota is charged at the tick, as lanes doctor says.
				if !strings.Contains(a.Error, "SCHED_FIFO") {
					t.Errorf("tick assist failed: %s", a.Error)
				}
				t.Logf("tick assist refused SCHED_FIFO here: windows held to the tick")
			case rl.Mechanism == "CFS bandwidth" && a.Every > 0:
				grain = 100 * a.Every.Seconds() / 0.1
				// It runs where the busy loop ran lately (one CPU or more)
				// while the lane uses its reservation under the guarantee:
				// under emulation, where the modes are only logged, it may
				// not.
				running := a.Running && a.Starts >= 1 && len(a.CPUs) >= 1 && len(a.CPUs) <= ncpu
				if !running && (!exact || testutil.Emulated() || rl.Mode != "guarantee") {
					t.Logf("not asserted: tick assist %+v in mode %s", a, rl.Mode)
					break
				}
				if !running {
					t.Errorf("tick assist %+v under the guarantee, want it running on 1 to %d CPUs", a, ncpu)
				}
				if out := e.lanes("status").stdout; !strings.Contains(out, "tick assist: every "+a.Every.String()+", running on CPUs") {
					t.Errorf("lanes status does not show the tick assist running:\n%s", out)
				}
			}
			// A deadline thread that overran by a tick may be given its own
			// policy back for a second (a stall, in rl.Stalls): the policy
			// is asked for over twice that.
			got := spinnerPolicy(t, pid)
			for end := time.Now().Add(2500 * time.Millisecond); got != tt.policy && time.Now().Before(end); got = spinnerPolicy(t, pid) {
				time.Sleep(50 * time.Millisecond)
			}
			if got != tt.policy && exact {
				// Under emulation a deadline thread overruns its runtime
				// often (the guest's clock and its ticks come late), and
				// each overrun gives it its own policy back for a second:
				// with stalls counted, the policy is only logged there.
				if stalls := mode().Stalls; testutil.Emulated() && stalls > 0 {
					t.Logf("not asserted under emulation: busy thread's policy %d for 2.5 s, want %d (%s, %d stalls)", got, tt.policy, rl.Mechanism, stalls)
				} else {
					t.Errorf("busy thread's policy %d under the guarantee for 2.5 s, want %d (%s, %d stalls)", got, tt.policy, rl.Mechanism, stalls)
				}
			}
			out := e.lanes("status").stdout
			if !strings.Contains(out, "rsv: 20% of a CPU by "+rl.Mechanism+"") {
				t.Errorf("lanes status does not show the reservation:\n%s", out)
			}
			// The mode is asserted where reach asserted it: under emulation
			// the lane comes and goes between the modes with the guest's
			// idle time (the 7.x guest once showed it beyond, after 35
			// changes), and there the modes are only logged.
			if exact && !testutil.Emulated() && !strings.Contains(out, "guarantee") {
				t.Errorf("lanes status does not show the reservation's guarantee:\n%s", out)
			}
			for _, h := range hogs {
				h.Process.Kill()
				h.Wait()
			}
			reach("beyond again", "beyond")
			time.Sleep(300 * time.Millisecond)
			if a != nil && a.Running {
				// Beyond its reservation nothing binds: the assist stops a
				// linger after the guarantee ends.
				assistQuiet(t, e, within, exact)
			}
			again := shares(t, pid, 10)
			t.Logf("alone again: %s", summary(again))

			e.stop()
			for _, tid := range threads(t, pid) {
				got := policyOf(t, tid)
				if got == 0 {
					continue
				}
				if testutil.Emulated() && tt.mechanism == "deadline" {
					// A known defect, open in issue 17: in the 7.x guest under
					// TCG, where the forced deadline split stalls threads again
					// and again, one thread was left at SCHED_DEADLINE after
					// stop (twice, not on the host). Reported, not asserted
					// there until it is found.
					t.Logf("KNOWN DEFECT (issue 17): after lanesd stopped thread %d's policy is %d, want its own 0\nlanesd's log:\n%s", tid, got, e.log)
					continue
				}
				t.Errorf("after lanesd stopped thread %d's policy is %d, want its own 0\nlanesd's log:\n%s", tid, got, e.log)
			}

			if !timing || !exact {
				return
			}
			tol := 2 + grain
			// A window the hypervisor took time in measures the hypervisor,
			// not lanes: it is not judged. (On the development machine, a
			// guest whose steal /proc/stat counts, one window out of bounds
			// had the lane and the loops together at 104 % of the 200.)
			var fair []float64
			for i, x := range crowded {
				if !judged[i] {
					t.Logf("window %d not judged: the hypervisor took %v in it or the next (%.1f %% of a CPU, the loops %.1f %%)", i, stolen[i], x, hogShares[i])
					continue
				}
				fair = append(fair, x)
				if x < 20-tol || x > 20+tol {
					t.Errorf("window %d against busy loops: %.1f %% of a CPU, want 20 ± %.1f (2 and the tick or the assist's period) (%s; %d mode changes during the windows; the loops got %.1f %% of a CPU in it, together %.1f of the host's %d00)",
						i, x, tol, summary(crowded), rl.Changes-before, hogShares[i], x+hogShares[i], ncpu)
				}
			}
			if len(fair) < len(crowded)/2 {
				t.Errorf("the hypervisor took time in %d of %d windows against busy loops: too few left to judge (%v)", len(crowded)-len(fair), len(crowded), stolen)
			} else if m := mean(fair); m < 19 || m > 21 {
				t.Errorf("against busy loops: %s over the %d windows judged, want a mean of 20 ± 1", summary(fair), len(fair))
			}
			for name, xs := range map[string][]float64{"alone": alone, "alone again": again} {
				if s := summary(xs); median(xs) < 90 {
					t.Errorf("%s: %s, want the whole CPU nothing else wants (median at least 90 %%)", name, s)
				}
			}
		})
	}
}

// spinnerPolicy is the policy of the process's busiest thread (the one
// spinning).
func spinnerPolicy(t *testing.T, pid int) int {
	t.Helper()
	best, most := 0, time.Duration(-1)
	for _, tid := range threads(t, pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", tid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		if time.Duration(ns) > most {
			best, most = tid, time.Duration(ns)
		}
	}
	return policyOf(t, best)
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// deadlineRoom skips the test when the kernel's deadline admission
// control has no room for share (percent of one CPU) in a 10 ms period:
// lanesd then falls back to CFS bandwidth (what TestReserve's cfs arms
// test). Deadline bandwidth is global: other deadline tasks take it, and
// a kernel may leak it (a throttled deadline task killed, or one whose
// parameters changed while throttled, may keep its bandwidth counted).
func deadlineRoom(t *testing.T, share float64) {
	t.Helper()
	c := spawn(t, nil, "sleep", "10")
	err := cpu.SetThreadDeadline(c.Process.Pid, time.Duration(share/100*float64(10*time.Millisecond)), 10*time.Millisecond)
	c.Process.Kill()
	c.Wait()
	if err != nil {
		t.Skipf("no room for %g%% of a CPU in the kernel's deadline admission control (%v): lanesd would fall back to CFS bandwidth", share, err)
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// tickSeconds is the kernel's tick from its config (250 Hz when it cannot
// be read: the common distribution default).
func tickSeconds(t *testing.T) float64 {
	out, err := exec.Command("sh", "-c", "(zcat /proc/config.gz 2>/dev/null || cat /boot/config-$(uname -r) 2>/dev/null) | grep '^CONFIG_HZ='").Output()
	if hz, err2 := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(out)), "CONFIG_HZ=")); err == nil && err2 == nil && hz > 0 {
		return 1 / float64(hz)
	}
	return 1.0 / 250
}

// Reservations' bad input and crash: a config whose reservations do not
// fit the host is refused by lanes config check, by a reload (the
// running config kept) and at start; a lanesd killed while a thread is
// under SCHED_DEADLINE leaves it so, and the next lanesd gives the
// thread its own policy back from its record.
// assistQuiet waits, where lanesd runs the tick assist and the modes
// are asserted (exact, not under emulation), for the assist to stop: it
// runs on the lane's CPUs for reserve.AssistLinger after the lane last
// used its reservation, waking every millisecond under SCHED_FIFO (some
// 6 % of that CPU here), so a lane that has just gone beyond its
// reservation shares its CPU with it for up to that long. The windows
// alone measure the lane beyond its reservation once nothing binds.
func assistQuiet(t *testing.T, e *env, within time.Duration, exact bool) {
	t.Helper()
	if !exact || testutil.Emulated() {
		return
	}
	waitFor(t, within, "the tick assist to stop before the windows alone", func() bool {
		var st api.Status
		e.lanesJSON(&st, "status")
		return st.ReserveAssist == nil || !st.ReserveAssist.Running
	})
}

func TestReserveAdmissionAndCrash(t *testing.T) {
	ncpu := numCPU(t)
	over := fmt.Sprintf("[lanes.a]\ncpu.reserve = \"%d%%\"\n\n[lanes.b]\ncpu.reserve = \"10%%\"\n", 95*ncpu)
	e := newEnv(t, "[lanes.rsv]\ncpu.reserve = \"5%\"\n")
	e.startWith([]string{e.bin, "--reserve-mechanism", "deadline"})

	bad := filepath.Join(t.TempDir(), "over.toml")
	if err := os.WriteFile(bad, []byte(over), 0o644); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("the reservations sum to %d%% of a CPU, more than this host admits (%d%%: %d CPUs, 95%% of each)", 95*ncpu+10, 95*ncpu, ncpu)
	if r := e.lanes("config", "check", bad); r.code == 0 || !strings.Contains(r.stderr+r.stdout, want) {
		t.Errorf("lanes config check of reservations over the host: exit %d %q %q, want %q", r.code, r.stdout, r.stderr, want)
	}
	for _, c := range []struct{ file, want string }{
		{over, want},
		{"[lanes.a]\ncpu.reserve = \"2ms/10ms 3/3\"\n", "window constraint 3/3: want 0 <= x < y"},
		{"[lanes.a]\ncpu = { reserve = \"20%\", idle = true }\n", "lanes.a.cpu.reserve: a lane with cpu.idle = true cannot hold a reservation"},
		{"[lanes.a]\ncpu.reserve = \"20ms\"\n", `lanes.a.cpu.reserve: "20ms" is not a reservation`},
	} {
		e.writeConfig(c.file)
		if r := e.lanes("reload"); r.code == 0 || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "running config is kept") {
			t.Errorf("reload of %q: exit %d %q, want %q and the running config kept", c.file, r.code, r.stderr, c.want)
		}
		var st api.Status
		e.lanesJSON(&st, "status")
		if len(st.Reserve) != 1 || st.Reserve[0].Lane != "rsv" {
			t.Errorf("after a refused reload the reservations are %+v, want rsv's kept", st.Reserve)
		}
	}

	deadlineRoom(t, 5)
	loop := busy(t, e.bin, 60)
	pid := loop.Process.Pid
	if r := e.lanes("move", strconv.Itoa(pid), "rsv"); r.code != 0 {
		t.Fatalf("lanes move: %d %s", r.code, r.stderr)
	}
	for range 2 * ncpu {
		busy(t, e.bin, 30)
	}
	within := 5 * time.Second
	if testutil.Emulated() {
		within = 30 * time.Second
	}
	waitFor(t, within, "the busy thread under SCHED_DEADLINE", func() bool { return spinnerPolicy(t, pid) == 6 })
	e.kill9()
	if got := spinnerPolicy(t, pid); got != 6 {
		t.Fatalf("after lanesd was killed the busy thread's policy is %d, want SCHED_DEADLINE (6) left", got)
	}
	// The next lanesd runs without the reservation: the record alone
	// gives the threads back.
	e.writeConfig("")
	e.start()
	for _, tid := range threads(t, pid) {
		if got := policyOf(t, tid); got != 0 {
			t.Errorf("after a restart thread %d's policy is %d, want its own 0", tid, got)
		}
	}
	if !e.logged("gave 1 processes an earlier lanesd reserved CPU for their own scheduling back") {
		t.Errorf("lanesd's log does not say it gave the reservation back:\n%s", e.log)
	}
	e.stop()

	// A start with reservations over the host fails and says why.
	e.writeConfig(over)
	c := exec.Command(e.bin, e.daemonArgs()...)
	c.Env = append(os.Environ(), roleEnv+"=lanesd")
	out, err := c.CombinedOutput()
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("lanesd with reservations over the host: %v\n%s\nwant %q", err, out, want)
	}
}
