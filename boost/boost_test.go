package boost

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Every one of the seed's fourteen linear policies, driven through the
// same script: a process (nice 0) seen before the contact; a contact in
// which six observations 100 ms apart each find one more socket event
// and 30,000 more bytes; the contact ends; two observations outside
// (counters moving); a second contact with two observations. Dynamic
// policies step every 2 events, 200 ms or 60,000 bytes, so each unit
// steps about every other observation (time counts from the first
// observation that saw traffic, so it lags by one). At each contact's
// start lanesd takes the counters as a baseline (traffic outside a
// contact is not the contact's). The trajectories are written out by
// hand.
func TestTrajectories(t *testing.T) {
	incr := Policy{Kind: Incr, Initial: -1, Final: -4, Clamp: NiceMin}
	decr := Policy{Kind: Decr, Initial: -4, Final: -1, Clamp: NiceMin}
	static := Policy{Kind: Static, Initial: -5, Clamp: NiceMin}
	with := func(p Policy, u Unit, end Ending) Policy {
		p.Step, p.OnLeave = u, end
		switch u {
		case Events:
			p.Every = 2
		case Time:
			p.Every = float64(200 * time.Millisecond)
		case Bytes:
			p.Every = 60000
		}
		if p.Kind == Static {
			p.Step, p.Every = "", 0
		}
		return p
	}
	for _, c := range []struct {
		p    Policy
		want string // contact 1 | after it ends | contact 2
	}{
		{with(static, "", Reset), "-5 -5 -5 -5 -5 -5 | 0 | -5 -5"},
		{with(static, "", Retain), "-5 -5 -5 -5 -5 -5 | -5 | -5 -5"},
		{with(incr, Events, Reset), "-1 -2 -2 -3 -3 -4 | 0 | -1 -2"},
		{with(incr, Events, Retain), "-1 -2 -2 -3 -3 -4 | -4 | -4 -4"},
		{with(incr, Time, Reset), "-1 -1 -2 -2 -3 -3 | 0 | -1 -1"},
		{with(incr, Time, Retain), "-1 -1 -2 -2 -3 -3 | -3 | -4 -4"},
		{with(incr, Bytes, Reset), "-1 -2 -2 -3 -3 -4 | 0 | -1 -2"},
		{with(incr, Bytes, Retain), "-1 -2 -2 -3 -3 -4 | -4 | -4 -4"},
		{with(decr, Events, Reset), "-4 -3 -3 -2 -2 -1 | 0 | -4 -3"},
		{with(decr, Events, Retain), "-4 -3 -3 -2 -2 -1 | -1 | -1 -1"},
		{with(decr, Time, Reset), "-4 -4 -3 -3 -2 -2 | 0 | -4 -4"},
		{with(decr, Time, Retain), "-4 -4 -3 -3 -2 -2 | -2 | -1 -1"},
		{with(decr, Bytes, Reset), "-4 -3 -3 -2 -2 -1 | 0 | -4 -3"},
		{with(decr, Bytes, Retain), "-4 -3 -3 -2 -2 -1 | -1 | -1 -1"},
	} {
		name := fmt.Sprintf("%s/%s/%s", c.p.Kind, c.p.Step, c.p.OnLeave)
		t.Run(name, func(t *testing.T) {
			tr, err := NewTracker(c.p)
			if err != nil {
				t.Fatal(err)
			}
			const pid = 42
			t0 := time.Unix(1000, 0)
			at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
			nice := 0
			var cnt Counters
			obs := func(ms int) int {
				cnt.Events++
				cnt.Bytes += 30000
				if ch, ok := tr.Observe(at(ms), pid, 0, cnt); ok {
					if ch.PID != pid {
						t.Fatalf("change for pid %d", ch.PID)
					}
					nice = ch.Nice
				}
				return nice
			}
			tr.Observe(at(0), pid, 0, cnt) // seen before the contact
			var got []string
			tr.Enter(at(1000))
			tr.Observe(at(1000), pid, 0, cnt) // the baseline lanesd takes at once
			for ms := 1100; ms <= 1600; ms += 100 {
				got = append(got, fmt.Sprint(obs(ms)))
			}
			for _, ch := range tr.Leave(at(1650)) {
				nice = ch.Nice
			}
			got = append(got, "|", fmt.Sprint(nice))
			obs(1800)
			obs(1900)
			if fmt.Sprint(nice) != got[len(got)-1] {
				t.Errorf("nice changed to %d outside a contact", nice)
			}
			got = append(got, "|")
			tr.Enter(at(2000))
			tr.Observe(at(2000), pid, 0, cnt)
			got = append(got, fmt.Sprint(obs(2100)), fmt.Sprint(obs(2200)))
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("trajectory %s, want %s", s, c.want)
			}
			// Always undone.
			for _, ch := range tr.Undo() {
				nice = ch.Nice
			}
			if nice != 0 || len(tr.Boosted()) != 0 {
				t.Errorf("after Undo nice %d, %d boosted; want 0 and none", nice, len(tr.Boosted()))
			}
		})
	}
}

// The seed's two evaluated policies at its parameters: INCR from nice −1
// by one level per event to −20; DECR from −20 by one level per 60 KB
// to −1.
func TestSeedPolicies(t *testing.T) {
	incr := Policy{Kind: Incr, Initial: -1, Final: -20, Step: Events, Every: 1, Clamp: -20, OnLeave: Reset}
	decr := Policy{Kind: Decr, Initial: -20, Final: -1, Step: Bytes, Every: 60000, Clamp: -20, OnLeave: Reset}
	for _, c := range []struct {
		p        Policy
		progress float64
		want     int
	}{
		{incr, 0, -1}, {incr, 1, -2}, {incr, 18, -19}, {incr, 19, -20}, {incr, 1e6, -20},
		{decr, 0, -20}, {decr, 59999, -20}, {decr, 60000, -19}, {decr, 19 * 60000, -1}, {decr, 1e12, -1},
	} {
		if got := c.p.Level(c.progress); got != c.want {
			t.Errorf("%s after %v: nice %d, want %d", c.p.Kind, c.progress, got, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	ok := Policy{Kind: Incr, Initial: -1, Final: -20, Step: Events, Every: 1, Clamp: -20, OnLeave: Reset}
	if err := ok.Check(); err != nil {
		t.Fatalf("valid policy: %v", err)
	}
	for _, c := range []struct {
		mod  func(*Policy)
		want string
	}{
		{func(p *Policy) { p.Kind = "turbo" }, `policy: unknown policy "turbo"`},
		{func(p *Policy) { p.Step = "packets" }, `step: unknown step "packets"`},
		{func(p *Policy) { p.OnLeave = "keep" }, `on_leave: unknown ending "keep"`},
		{func(p *Policy) { p.Every = 0 }, "every: 0 must be positive"},
		{func(p *Policy) { p.Initial = -21 }, "initial: nice -21 outside"},
		{func(p *Policy) { p.Final = 20 }, "final: nice 20 outside"},
		{func(p *Policy) { p.Clamp = -10 }, "final: nice -20 is beyond the clamp -10"},
		{func(p *Policy) { p.Clamp = -30 }, "clamp: nice -30 outside"},
		{func(p *Policy) { p.Final = 0 }, "incr raises the priority"},
		{func(p *Policy) { p.Kind = Decr }, "decr lowers the priority"},
	} {
		p := ok
		c.mod(&p)
		err := p.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", p, err, c.want)
		}
		if _, err := NewTracker(p); err == nil {
			t.Errorf("NewTracker took %+v", p)
		}
	}
}

// A process already above the boost keeps its own priority; one that
// never communicates is never boosted; one that leaves the lane gets its
// own nice back; counters that go back (a reused pid) count from there.
func TestTrackerEdges(t *testing.T) {
	p := Policy{Kind: Static, Initial: -5, Clamp: -20, OnLeave: Reset}
	tr, _ := NewTracker(p)
	now := time.Unix(0, 0)
	tr.Observe(now, 1, -10, Counters{})
	tr.Observe(now, 2, 0, Counters{})
	tr.Observe(now, 3, 0, Counters{Events: 100})
	tr.Enter(now)
	for _, pid := range tr.PIDs() { // the baselines at the contact's start
		tr.Observe(now, pid, 0, map[int]Counters{1: {}, 2: {}, 3: {Events: 100}}[pid])
	}
	if _, ok := tr.Observe(now, 1, -10, Counters{Events: 5}); ok {
		t.Error("a process at nice -10 was changed by a -5 boost")
	}
	if _, ok := tr.Observe(now, 2, 0, Counters{}); ok {
		t.Error("a process without traffic was boosted")
	}
	if ch, ok := tr.Observe(now, 3, 0, Counters{Events: 3}); !ok || ch.Nice != -5 {
		t.Errorf("counters that went back (100 -> 3): %v %v, want a boost to -5 (3 new events)", ch, ok)
	}
	if b := tr.Boosted(); len(b) != 1 || b[0].PID != 3 || b[0].Orig != 0 {
		t.Errorf("boosted %+v, want pid 3 from 0", b)
	}
	if ch, ok := tr.Forget(3); !ok || ch != (Change{PID: 3, Nice: 0, Restore: true}) {
		t.Errorf("Forget: %v %v, want nice 0 back", ch, ok)
	}
	if _, ok := tr.Forget(3); ok {
		t.Error("Forget twice changed again")
	}
	if len(tr.Undo()) != 0 {
		t.Error("Undo with nothing boosted changed something")
	}
}

// From Start: a process that starts in the lane during a contact, or
// while the link was down before it, is boosted at its first
// observation, before any traffic, at the policy's level for no progress
// (time policies count from its start, or the contact's if later), and
// then steps with its traffic; one that started before the link went
// down (or before the contact, when the tracker was never told), or any
// process under From Traffic, waits for its traffic.
func TestStarted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	static := Policy{Kind: Static, Initial: -20, Clamp: NiceMin, OnLeave: Reset}
	incr := Policy{Kind: Incr, Initial: -1, Final: -20, Step: Events, Every: 1, Clamp: NiceMin, OnLeave: Reset}
	decr := Policy{Kind: Decr, Initial: -20, Final: -1, Step: Bytes, Every: 60000, Clamp: NiceMin, OnLeave: Reset}
	incrTime := Policy{Kind: Incr, Initial: -1, Final: -20, Step: Time, Every: float64(100 * time.Millisecond), Clamp: NiceMin, OnLeave: Reset}
	from := func(p Policy, s Source) Policy { p.From = s; return p }
	for _, c := range []struct {
		name    string
		p       Policy
		started int // ms; the contact begins at 1000
		down    int // ms; when Down says the link went down (0: not told)
		orig    int
		// the nice after the first observation (at 1200, no traffic),
		// then after one with 2 events and 120 KB more (at 1300), then
		// in the next contact (reset), after its baseline and one more
		// observation without traffic
		first, then, again int
	}{
		{"static, started in the contact", from(static, Start), 1100, 0, 0, -20, -20, -20},
		{"incr, started in the contact", from(incr, Start), 1100, 0, 0, -1, -3, -1},
		{"decr, started in the contact", from(decr, Start), 1100, 0, 0, -20, -18, -20},
		{"incr by time counts from the start", from(incrTime, Start), 1000, 0, 0, -3, -4, -1},
		{"started before the contact: its traffic", from(static, Start), 900, 0, 0, 0, -20, 0},
		{"started while the link was down", from(static, Start), 900, 800, 0, -20, -20, -20},
		{"decr, started while the link was down", from(decr, Start), 900, 800, 0, -20, -18, -20},
		{"incr by time, started while down: from the contact's start", from(incrTime, Start), 900, 800, 0, -3, -4, -1},
		{"started before the link went down: its traffic", from(static, Start), 700, 800, 0, 0, -20, 0},
		{"from traffic, started while down: its traffic", from(static, Traffic), 900, 800, 0, 0, -20, 0},
		{"from traffic: its traffic", from(static, Traffic), 1100, 0, 0, 0, -20, 0},
		{"the default is traffic", static, 1100, 0, 0, 0, -20, 0},
		{"its own nice above the boost is kept", from(incr, Start), 1100, 0, -5, -5, -5, -5},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := NewTracker(c.p)
			if err != nil {
				t.Fatal(err)
			}
			const pid = 7
			nice := c.orig
			apply := func(ch Change, ok bool) {
				if ok {
					nice = ch.Nice
				}
			}
			if c.down != 0 {
				tr.Down(at(c.down))
			}
			tr.Enter(at(1000))
			apply(tr.Started(at(1200), at(c.started), pid, c.orig, Counters{}))
			if nice != c.first {
				t.Errorf("first observation: nice %d, want %d", nice, c.first)
			}
			apply(tr.Started(at(1300), at(c.started), pid, c.orig, Counters{Events: 2, Bytes: 120000}))
			if nice != c.then {
				t.Errorf("after 2 events and 120 KB: nice %d, want %d", nice, c.then)
			}
			for _, ch := range tr.Leave(at(1400)) {
				nice = ch.Nice
			}
			if nice != c.orig {
				t.Errorf("after the contact: nice %d, want its own %d", nice, c.orig)
			}
			cnt := Counters{Events: 2, Bytes: 120000}
			tr.Enter(at(2000))
			apply(tr.Observe(at(2000), pid, c.orig, cnt))
			apply(tr.Observe(at(2100), pid, c.orig, cnt))
			if nice != c.again {
				t.Errorf("in the next contact, without traffic: nice %d, want %d", nice, c.again)
			}
		})
	}
	// Outside a contact nothing is boosted, whenever the process started.
	tr, _ := NewTracker(from(static, Start))
	if _, ok := tr.Started(at(1200), at(1100), 1, 0, Counters{}); ok {
		t.Error("a process that started outside any contact was boosted")
	}
	// After a contact, a process that started once it ended (the link
	// down) counts in the next; one that started in it (moved into the
	// lane since), or was seen there without traffic, waits for its
	// traffic. Down, outside a contact, moves the time processes count
	// from.
	tr, _ = NewTracker(from(static, Start))
	first := func(now, started, pid int, boosted bool, what string) {
		t.Helper()
		ch, ok := tr.Started(at(now), at(started), pid, 0, Counters{})
		if ok != boosted || (ok && ch.Nice != -20) {
			t.Errorf("%s: %+v %v, want boosted %v (nice -20)", what, ch, ok, boosted)
		}
	}
	tr.Enter(at(0))
	tr.Observe(at(100), 1, 0, Counters{}) // seen in the contact, no traffic
	tr.Leave(at(500))
	tr.Enter(at(1000))
	first(1000, 400, 2, false, "a process started in the last contact, first seen now")
	first(1000, 600, 3, true, "a process started after the last contact ended")
	if _, ok := tr.Observe(at(1100), 1, 0, Counters{}); ok {
		t.Error("a process seen in the last contact without traffic was boosted")
	}
	tr.Leave(at(1200))
	if got := tr.DownSince(); !got.Equal(at(1200)) {
		t.Errorf("DownSince after a contact = %v, want its end %v", got, at(1200))
	}
	tr.Down(at(1500))
	if got := tr.DownSince(); !got.Equal(at(1500)) {
		t.Errorf("DownSince after Down = %v, want %v", got, at(1500))
	}
	tr.Enter(at(2000))
	if got := tr.DownSince(); !got.IsZero() {
		t.Errorf("DownSince in a contact = %v, want zero", got)
	}
	first(2000, 1300, 4, false, "a process started before Down's time")
	first(2000, 1600, 5, true, "a process started after Down's time")
	if err := from(static, "exec").Check(); err == nil || !strings.Contains(err.Error(), `from: unknown source "exec"`) {
		t.Errorf("from = exec: %v, want an error naming from", err)
	}
}
