package diskidle

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/idletime"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// idleFixture is a loop device, a background group and gates on the
// device for the group.
type idleFixture struct {
	loop  *loopDev
	bg    bgGroup
	gates *IdleGates
	gate  *diskGate
}

func newIdleFixture(t *testing.T) *idleFixture {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "disk idletime", ProbeIdle)
	f := &idleFixture{loop: newLoop(t, 64), bg: newBgGroup(t)}
	gates, err := NewIdleGates(f.bg.v1, f.bg.v2, []string{f.loop.path})
	if err != nil {
		t.Fatal(err)
	}
	f.gates = gates
	t.Cleanup(func() {
		if err := gates.Close(); err != nil {
			t.Error(err)
		}
	})
	f.gate = gates.Gates[0].(*diskGate)
	return f
}

// throttleContent reads the group's throttle files for the cleanup check.
func (f *idleFixture) throttleContent(t *testing.T) string {
	t.Helper()
	dir := f.bg.v1
	if f.gate.s.backend == throttleV2 {
		dir = f.bg.v2
	}
	var all string
	for _, w := range throttleWrites(f.gate.s.backend, f.gate.dev, true) {
		b, err := os.ReadFile(filepath.Join(dir, w.file))
		if err != nil {
			t.Fatal(err)
		}
		all += string(b)
	}
	return all
}

func expectEvents(t *testing.T, ch <-chan idletime.Event, want int, wait time.Duration) []idletime.Event {
	t.Helper()
	var got []idletime.Event
	deadline := time.After(wait)
	for {
		select {
		case ev := <-ch:
			got = append(got, ev)
			if len(got) > want {
				t.Fatalf("%d events, want %d: %v", len(got), want, got)
			}
		case <-deadline:
			if len(got) != want {
				t.Fatalf("%d events within %v, want %d", len(got), wait, want)
			}
			return got
		}
	}
}

// TestIdleGateEventOncePerRelease: foreground I/O on an open gate posts
// exactly one event and clears open; more foreground I/O posts nothing
// until Release re-arms.
func TestIdleGateEventOncePerRelease(t *testing.T) {
	f := newIdleFixture(t)
	if name := f.gate.Name(); name != "disk "+f.loop.name+" ("+f.gate.dev.MajMin()+")" {
		t.Errorf("gate name %q", name)
	}
	if armed, err := f.gate.armed(); err != nil || !armed {
		t.Fatalf("new gate armed = %v, %v; want true", armed, err)
	}
	r := newDirectReader(t, f.loop)
	before := monoNow()
	for range 20 {
		if err := r.read(); err != nil {
			t.Fatal(err)
		}
	}
	evs := expectEvents(t, f.gates.Events, 1, 300*time.Millisecond)
	if evs[0].Gate != 0 || evs[0].At < before {
		t.Errorf("event %+v, want gate 0 at or after %d", evs[0], before)
	}
	if armed, _ := f.gate.armed(); armed {
		t.Error("gate still armed after its event")
	}
	last, err := f.gate.LastForeground()
	if err != nil || last < evs[0].At {
		t.Errorf("LastForeground = %d, %v; want >= event %d", last, err, evs[0].At)
	}
	// Hold and release: re-armed, the next foreground read posts one event.
	if err := f.gate.Hold(); err != nil {
		t.Fatal(err)
	}
	if err := f.gate.Release(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := r.read(); err != nil {
			t.Fatal(err)
		}
	}
	expectEvents(t, f.gates.Events, 1, 300*time.Millisecond)
}

// TestIdleGateHoldsBackground: while held, the background group's reads do
// not complete (the device's read sectors stay put) and post no event;
// after Release they resume at once, and the re-queued held bios are still
// background (no event). Close leaves no limit behind.
func TestIdleGateHoldsBackground(t *testing.T) {
	f := newIdleFixture(t)
	if err := f.gate.Hold(); err != nil {
		t.Fatal(err)
	}
	if c := f.throttleContent(t); !limitLeft(c, f.gate.dev) {
		t.Fatalf("held, but the throttle files say %q", c)
	}
	bg := startIn(t, f.bg.g.Dirs(), bgReader(f.loop, 20*time.Second)...)
	time.Sleep(700 * time.Millisecond) // fio starts and submits
	s0 := f.loop.sectorsRead(t)
	time.Sleep(500 * time.Millisecond)
	if s1 := f.loop.sectorsRead(t); s1 != s0 {
		t.Errorf("held: %d sectors read in 500 ms, want 0", s1-s0)
	}
	if lb, _ := f.gate.LastBackground(); lb != 0 {
		t.Logf("last background stamp while held: %d (bios queued before the hold)", lb)
	}
	// The gate is released: drain events from earlier; none is expected.
	if err := f.gate.Release(); err != nil {
		t.Fatal(err)
	}
	rel := time.Now()
	var resumed time.Duration
	// A functional wait: under emulation a loaded guest takes seconds.
	wait := time.Second
	if testutil.Emulated() {
		wait = 10 * time.Second
	}
	for time.Since(rel) < wait {
		if f.loop.sectorsRead(t) != s0 {
			resumed = time.Since(rel)
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	if resumed == 0 {
		t.Fatalf("background did not resume within %v of Release", wait)
	}
	t.Logf("background resumed %v after Release", resumed)
	expectEvents(t, f.gates.Events, 0, 300*time.Millisecond)
	lb, err := f.gate.LastBackground()
	if err != nil || lb == 0 {
		t.Errorf("LastBackground = %d, %v; want a stamp", lb, err)
	}
	if lf, _ := f.gate.LastForeground(); lf != 0 {
		t.Errorf("background reads stamped foreground (%d)", lf)
	}
	// Hold again while the reader runs: the in-flight requests finish, then
	// nothing more completes.
	if err := f.gate.Hold(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	s2 := f.loop.sectorsRead(t)
	time.Sleep(400 * time.Millisecond)
	if s3 := f.loop.sectorsRead(t); s3 != s2 {
		t.Errorf("held while running: %d sectors read in 400 ms, want 0", s3-s2)
	}
	if err := f.gates.Close(); err != nil {
		t.Fatal(err)
	}
	if c := f.throttleContent(t); limitLeft(c, f.gate.dev) {
		t.Errorf("limit left after Close: %q", c)
	}
	// Released by Close: the reader runs again.
	s4 := f.loop.sectorsRead(t)
	time.Sleep(200 * time.Millisecond)
	if f.loop.sectorsRead(t) == s4 {
		t.Error("background still held after Close")
	}
	stop(bg)
}

// TestIdleGatePILoop drives the gate with a tiny PI loop (Hold on event,
// Release PI after the last foreground bio): during a foreground burst
// the background is held after the first preemption, and it resumes about
// one PI after the burst.
func TestIdleGatePILoop(t *testing.T) {
	f := newIdleFixture(t)
	const pi = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := drivePI(ctx, f.gate, f.gates.Events, pi)
		done <- err
	}()
	bg := startIn(t, f.bg.g.Dirs(), bgReader(f.loop, 20*time.Second)...)
	time.Sleep(700 * time.Millisecond)
	r := newDirectReader(t, f.loop)
	// Foreground burst of 500 ms. Once the hold is in the throttle file,
	// no background bio may pass the throttle (the kernel's background
	// stamp stays before that moment) until the burst ends; requests
	// dispatched before the hold may still complete (not preempted).
	var heldAt idletime.Mono
	start := time.Now()
	n := 0
	for time.Since(start) < 500*time.Millisecond {
		if err := r.read(); err != nil {
			t.Fatal(err)
		}
		n++
		if heldAt == 0 && n%16 == 0 && limitLeft(f.throttleContent(t), f.gate.dev) {
			heldAt = monoNow()
		}
	}
	if heldAt == 0 {
		t.Fatal("background not held during a 500 ms foreground burst")
	}
	lastFg, _ := f.gate.LastForeground()
	if lb, _ := f.gate.LastBackground(); lb > heldAt {
		t.Errorf("a background bio passed the hold %v after it was in place", time.Duration(lb-heldAt))
	}
	// Resumption, by the kernel's stamps: the first background bio after
	// the burst, relative to the last foreground bio.
	// The wait is functional, not a timing bound (that follows): under
	// emulation a loaded guest runs the controller many times slower.
	wait := time.Second
	if testutil.Emulated() {
		wait = 10 * time.Second
	}
	var resumed time.Duration
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if lb, _ := f.gate.LastBackground(); lb > lastFg {
			resumed = time.Duration(lb - lastFg)
			break
		}
	}
	if resumed == 0 {
		t.Fatalf("background did not resume within %v of the burst's end", wait)
	}
	t.Logf("background resumed %v after the last foreground bio (PI %v)", resumed, pi)
	testutil.RequireTiming(t)
	if resumed < pi || resumed > pi+50*time.Millisecond {
		t.Errorf("background resumed %v after the burst, want the PI %v plus the release's dispatch delay", resumed, pi)
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
	stop(bg)
}
