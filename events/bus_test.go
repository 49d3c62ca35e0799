package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, topic string
		want           bool
	}{
		{"proc.exec", "proc.exec", true},
		{"proc.exec", "proc.exit", false},
		{"proc.*", "proc.exit", true},
		{"proc.*", "proc", false},
		{"proc.*", "proc.exit.code", false},
		{"proc.>", "proc.exit", true},
		{"proc.>", "proc.exit.code", true},
		{"proc.>", "proc", false},
		{">", "anything.at.all", true},
		{"*", "one", true},
		{"*", "one.two", false},
		{"lane.*.cpu", "lane.background.cpu", true},
		{"lane.*.cpu", "lane.background.net", false},
		{"lane.*.cpu", "lane.cpu", false},
		{"a.b", "a.bc", false},
		{"a.bc", "a.b", false},
		{"*.b.>", "x.b.y.z", true},
	} {
		if got := Match(tc.pattern, tc.topic); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.topic, got, tc.want)
		}
	}
}

func TestValidateTopic(t *testing.T) {
	for _, tc := range []struct {
		s        string
		pattern  bool
		errMatch string // "" = valid
	}{
		{"proc.exec", false, ""},
		{"lane.bg-1.cpu_usage", false, ""},
		{"host:a.x", false, ""},
		{"", false, "empty topic"},
		{"a..b", false, "empty token"},
		{".a", false, "empty token"},
		{"a.", false, "empty token"},
		{"a.*", false, "wildcards are for subscriptions"},
		{"a.>", false, "wildcards are for subscriptions"},
		{"a b", false, "not allowed"},
		{"a.*", true, ""},
		{"a.>", true, ""},
		{"a.>.b", true, "must be the last"},
		{"a.b*", true, "not allowed"},
		{string(make([]byte, MaxTopicLen+1)), false, "more than"},
	} {
		var err error
		if tc.pattern {
			err = ValidatePattern(tc.s)
		} else {
			err = ValidateTopic(tc.s)
		}
		switch {
		case tc.errMatch == "" && err != nil:
			t.Errorf("%.20q: unexpected error %v", tc.s, err)
		case tc.errMatch != "" && (err == nil || !strings.Contains(err.Error(), tc.errMatch)):
			t.Errorf("%.20q: error %v, want one containing %q", tc.s, err, tc.errMatch)
		}
	}
}

func TestPublishRoutes(t *testing.T) {
	b := New()
	defer b.Close()
	all, _ := b.Subscribe(Options{Name: "all", Topics: []string{">"}})
	procs, _ := b.Subscribe(Options{Name: "procs", Topics: []string{"proc.*"}})
	cpu, _ := b.Subscribe(Options{Name: "cpu", Topics: []string{"lane.*.cpu", "proc.exit"}})
	for _, topic := range []string{"proc.exec", "lane.bg.cpu", "proc.exit", "lane.bg.net"} {
		if b.Publish(Event{Source: "test", Topic: topic}) == 0 {
			t.Fatalf("publish %s refused", topic)
		}
	}
	if seq := b.Publish(Event{Source: "test", Topic: "bad topic"}); seq != 0 {
		t.Errorf("invalid topic published as %d", seq)
	}
	got := func(s *Subscription) []string {
		var ts []string
		for {
			e, ok := s.TryNext()
			if !ok {
				return ts
			}
			ts = append(ts, e.Topic)
		}
	}
	for _, tc := range []struct {
		s    *Subscription
		want string
	}{
		{all, "[proc.exec lane.bg.cpu proc.exit lane.bg.net]"},
		{procs, "[proc.exec proc.exit]"},
		{cpu, "[lane.bg.cpu proc.exit]"},
	} {
		if g := fmt.Sprint(got(tc.s)); g != tc.want {
			t.Errorf("%s got %s, want %s", tc.s.Name(), g, tc.want)
		}
	}
	st := b.Stats()
	if st.Published != 4 || st.InvalidTopics != 1 {
		t.Errorf("stats published %d invalid %d, want 4 and 1", st.Published, st.InvalidTopics)
	}
	// A subscription added later is reached by topics already routed.
	late, _ := b.Subscribe(Options{Name: "late", Topics: []string{"proc.exec"}})
	b.Publish(Event{Source: "test", Topic: "proc.exec"})
	if e, ok := late.TryNext(); !ok || e.Topic != "proc.exec" || e.Seq != 5 {
		t.Errorf("late subscriber got %v %v", e, ok)
	}
	// A closed one is not.
	late.Close()
	b.Publish(Event{Source: "test", Topic: "proc.exec"})
	if _, ok := late.TryNext(); ok {
		t.Error("closed subscription still receives")
	}
	if _, err := late.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after close: %v, want ErrClosed", err)
	}
}

func TestDropPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy    DropPolicy
		wantFirst int
	}{
		{DropNewest, 0},
		{DropOldest, 6},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			b := New()
			defer b.Close()
			s, err := b.Subscribe(Options{Name: "s", Topics: []string{"x"}, Queue: 4, Drop: tc.policy})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				b.Publish(Event{Source: "t", Topic: "x", Payload: map[string]any{"i": int64(i)}})
			}
			st := s.Stats()
			if st.Dropped != 6 || st.Queued != 4 {
				t.Fatalf("dropped %d queued %d, want 6 and 4", st.Dropped, st.Queued)
			}
			e, _ := s.TryNext()
			if e.Payload["i"] != int64(tc.wantFirst) {
				t.Errorf("first event i=%v, want %d", e.Payload["i"], tc.wantFirst)
			}
		})
	}
}

// A subscriber that never takes its events must not slow or block a
// publisher, nor the other subscribers; its drops are counted.
func TestStuckSubscriber(t *testing.T) {
	b := New()
	defer b.Close()
	stuck, _ := b.Subscribe(Options{Name: "stuck", Topics: []string{">"}, Queue: 16})
	live, _ := b.Subscribe(Options{Name: "live", Topics: []string{">"}, Queue: 1 << 16})
	const n = 50000
	var wg sync.WaitGroup
	wg.Add(1)
	got := 0
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for got < n {
			if _, err := live.Next(ctx); err != nil {
				return
			}
			got++
		}
	}()
	done := make(chan struct{})
	go func() {
		for range n {
			b.Publish(Event{Source: "t", Topic: "a.b"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("publisher blocked by a stuck subscriber")
	}
	wg.Wait()
	if got != n {
		t.Errorf("live subscriber got %d of %d", got, n)
	}
	st := stuck.Stats()
	if st.Dropped != n-16 || st.Queued != 16 {
		t.Errorf("stuck: dropped %d queued %d, want %d and 16", st.Dropped, st.Queued, n-16)
	}
}

func TestDeadlines(t *testing.T) {
	b := New()
	defer b.Close()
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	s, _ := b.Subscribe(Options{Name: "s", Topics: []string{"x"}})
	b.Publish(Event{Source: "t", Topic: "x", Deadline: now.Add(time.Millisecond), Payload: map[string]any{"n": int64(1)}})
	b.Publish(Event{Source: "t", Topic: "x", Deadline: now.Add(time.Hour), Payload: map[string]any{"n": int64(2)}})
	b.Publish(Event{Source: "t", Topic: "x", Payload: map[string]any{"n": int64(3)}})
	now = now.Add(time.Second) // the first one's deadline passes while queued
	var got []any
	for {
		e, ok := s.TryNext()
		if !ok {
			break
		}
		got = append(got, e.Payload["n"])
	}
	if fmt.Sprint(got) != "[2 3]" {
		t.Errorf("delivered %v, want [2 3]", got)
	}
	if st := s.Stats(); st.Expired != 1 || st.Delivered != 2 {
		t.Errorf("expired %d delivered %d, want 1 and 2", st.Expired, st.Delivered)
	}
}

func TestFilters(t *testing.T) {
	b := New()
	defer b.Close()
	out, err := b.Subscribe(Options{Name: "out", Topics: []string{">"}, Out: `payload.fps < 15.0`})
	if err != nil {
		t.Fatal(err)
	}
	in, err := b.Subscribe(Options{Name: "in", Topics: []string{">"}, In: `topic.startsWith("app.") && payload.fps < 15`})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []Event{
		{Source: "t", Topic: "app.1.report", Payload: map[string]any{"fps": 20.0}},
		{Source: "t", Topic: "app.1.report", Payload: map[string]any{"fps": int64(10)}},
		{Source: "t", Topic: "lane.x.cpu", Payload: map[string]any{"fps": 5.0}},
		{Source: "t", Topic: "app.1.report", Payload: map[string]any{"other": 1.0}}, // no fps: an evaluation error
	} {
		b.Publish(e)
	}
	// OUT: fps < 15 passes the second and third; the first is filtered,
	// the fourth fails to evaluate.
	if st := out.Stats(); st.Queued != 2 || st.Filtered != 1 || st.FilterErrors != 1 {
		t.Errorf("out: %+v", st)
	}
	// IN: everything is queued, the second alone passes.
	n := 0
	for {
		e, ok := in.TryNext()
		if !ok {
			break
		}
		n++
		if e.Topic != "app.1.report" {
			t.Errorf("in delivered %s", e)
		}
	}
	if st := in.Stats(); n != 1 || st.Filtered != 2 || st.FilterErrors != 1 {
		t.Errorf("in: delivered %d, %+v", n, st)
	}
}

func TestFilterErrors(t *testing.T) {
	for _, tc := range []struct {
		expr       string
		line, col  int
		reasonPart string
	}{
		{`payload.fps <`, 1, 14, "Syntax error"},
		{`nosuch == 1`, 1, 1, "undeclared reference"},
		{"topic == 'a' &&\n  size(payload) + ", 2, 19, "Syntax error"},
		{`payload.fps + 1`, 0, 0, "want bool"},
		{`topic`, 0, 0, "want bool"},
		{``, 0, 0, "empty expression"},
	} {
		_, err := CompileFilter(tc.expr)
		var xe *ExprError
		if !errors.As(err, &xe) {
			t.Errorf("%q: error %v, want an *ExprError", tc.expr, err)
			continue
		}
		if xe.Line != tc.line || (tc.col != 0 && xe.Column != tc.col) || !strings.Contains(xe.Reason, tc.reasonPart) {
			t.Errorf("%q: got line %d column %d reason %q; want line %d column %d reason with %q",
				tc.expr, xe.Line, xe.Column, xe.Reason, tc.line, tc.col, tc.reasonPart)
		}
	}
}

// A filter that would do unbounded work is cut off by the cost limit, not
// run to the end: the event is counted as a filter error.
func TestFilterCostLimit(t *testing.T) {
	f, err := CompileFilter(`payload.items.all(x, payload.items.all(y, payload.items.all(z, x + y + z >= 0)))`)
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 1000)
	for i := range items {
		items[i] = int64(i)
	}
	start := time.Now()
	ok, err := f.Match(&Event{Topic: "x", Payload: map[string]any{"items": items}})
	if err == nil || ok {
		t.Fatalf("a 10⁹-step filter returned %v, %v; want the cost limit's error", ok, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the cost limit stopped the filter only after %s", d)
	}
}

func TestValidateEvent(t *testing.T) {
	big := make(map[string]any)
	for i := range MaxPayloadKeys + 1 {
		big[fmt.Sprint(i)] = 1.0
	}
	deep := map[string]any{"a": map[string]any{"b": map[string]any{"c": map[string]any{"d": map[string]any{"e": 1.0}}}}}
	for _, tc := range []struct {
		name string
		e    Event
		err  string
	}{
		{"ok", Event{Source: "app/1", Topic: "app.1.report", Payload: map[string]any{"fps": 20.0, "name": "x", "ok": true, "l": []any{1.0}}}, ""},
		{"no source", Event{Topic: "a"}, "no source"},
		{"bad topic", Event{Source: "s", Topic: "a..b"}, "empty token"},
		{"wildcard", Event{Source: "s", Topic: "a.*"}, "wildcards"},
		{"too many keys", Event{Source: "s", Topic: "a", Payload: big}, "more than"},
		{"too deep", Event{Source: "s", Topic: "a", Payload: deep}, "deep"},
		{"bad type", Event{Source: "s", Topic: "a", Payload: map[string]any{"f": func() {}}}, "not allowed"},
		{"NaN", Event{Source: "s", Topic: "a", Payload: map[string]any{"f": nan()}}, "finite"},
	} {
		err := ValidateEvent(&tc.e)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.err)
		}
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestSubscribeRefusals(t *testing.T) {
	b := New()
	for _, tc := range []struct {
		o   Options
		err string
	}{
		{Options{}, "no topics"},
		{Options{Topics: []string{"a..b"}}, "empty token"},
		{Options{Topics: []string{"a"}, Queue: -1}, "queue"},
		{Options{Topics: []string{"a"}, Queue: MaxQueue + 1}, "queue"},
		{Options{Topics: []string{"a"}, Out: "1 +"}, "out filter"},
		{Options{Topics: []string{"a"}, In: "topic"}, "in filter"},
		{Options{Topics: []string{"a"}, Drop: 7}, "drop policy"},
	} {
		if _, err := b.Subscribe(tc.o); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: error %v, want one with %q", tc.o, err, tc.err)
		}
	}
	b.Close()
	if _, err := b.Subscribe(Options{Topics: []string{"a"}}); !errors.Is(err, ErrClosed) {
		t.Errorf("subscribe on a closed bus: %v", err)
	}
}

// Interested follows the subscriptions' patterns as they come and go, and
// OnChange hooks run after each change until stopped.
func TestInterestedAndOnChange(t *testing.T) {
	b := New()
	var calls atomic.Int64
	var seen []bool
	stop := b.OnChange(func() {
		calls.Add(1)
		seen = append(seen, b.Interested("proc.fork"))
	})
	if b.Interested("proc.fork") {
		t.Fatal("interested with no subscription")
	}
	steps := []struct {
		topics []string
		want   bool
	}{
		{[]string{"proc.exec", "lane.>"}, false},
		{[]string{"proc.*"}, true},
		{[]string{">"}, true},
	}
	var subs []*Subscription
	want := false
	for _, st := range steps {
		s, err := b.Subscribe(Options{Name: "t", Topics: st.topics})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
		want = want || st.want
		if got := seen[len(seen)-1]; got != want {
			t.Errorf("after subscribing %v: interested %v, want %v", st.topics, got, want)
		}
	}
	subs[2].Close()
	if !seen[len(seen)-1] {
		t.Error("proc.* still subscribed, but not interested")
	}
	subs[1].Close()
	if seen[len(seen)-1] {
		t.Error("interested after the last matching subscription closed")
	}
	if n := calls.Load(); n != 5 {
		t.Errorf("hook called %d times, want 5 (3 subscribes, 2 closes)", n)
	}
	stop()
	subs[0].Close()
	if n := calls.Load(); n != 5 {
		t.Errorf("hook called after stop: %d calls", n)
	}
}
