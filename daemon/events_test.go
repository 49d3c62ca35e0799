package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/client"
	"github.com/lanes-qos/lanes/cmd/lanes/cli"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// eventsDaemon is a daemon with a bus, a state store and (history > 0) a
// history writer, serving its API on a Unix socket until the test ends.
func eventsDaemon(t *testing.T, history int, retention time.Duration) (*Daemon, *client.Client) {
	t.Helper()
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := lane.Default()
	cfg.Events.History, cfg.Events.Retention = history, retention
	d := &Daemon{logf: t.Logf, cfg: cfg, store: st, bus: events.New()}
	if d.ev, err = d.startEvents(cfg); err != nil {
		t.Fatal(err)
	}
	sock := serveAPI(t, d)
	t.Cleanup(func() { d.ev.stop(); d.bus.Close(); st.Close() })
	return d, client.New(sock)
}

func ptr(f float64) *float64 { return &f }

// A report is published on app.<caller's pid>.report with the metrics,
// the targets' bounds and who reported; the caller's directives stream
// gets the directives to its own pid.
func TestReportAndDirectives(t *testing.T) {
	d, c := eventsDaemon(t, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := d.bus.Subscribe(events.Options{Name: "test", Topics: []string{"app.>"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	resp, err := c.Report(ctx, api.ReportRequest{Metrics: map[string]float64{"fps": 19.5, "latency_ms": 40},
		Targets: map[string]api.Target{"fps": {Min: ptr(18), Max: ptr(25)}}})
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	if resp.PID != pid || resp.Topic != AppTopic(pid, "report") {
		t.Errorf("response %+v, want pid %d", resp, pid)
	}
	ev, err := sub.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"fps": 19.5, "latency_ms": 40.0, "fps_min": 18.0, "fps_max": 25.0,
		"pid": int64(pid), "uid": int64(os.Getuid()), "lane": laneOfPID(pid)}
	if ev.Topic != AppTopic(pid, "report") || ev.Seq != resp.Seq || len(ev.Payload) != len(want) {
		t.Fatalf("event %v, want %s with %v", ev, AppTopic(pid, "report"), want)
	}
	for k, v := range want {
		if ev.Payload[k] != v {
			t.Errorf("payload %s = %v (%T), want %v (%T)", k, ev.Payload[k], ev.Payload[k], v, v)
		}
	}

	// Directives: the stream carries this process's only.
	s, err := c.Directives(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitSubscribed(t, d.bus, "api/directives/")
	if _, err := PublishDirective(d.bus, "controller/test", 1, map[string]any{"fps_max": 10.0}); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishDirective(d.bus, "controller/test", pid, map[string]any{"fps_max": 20.0}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != AppTopic(pid, "directive") || got.Payload["fps_max"] != 20.0 || got.Payload["uid"] != float64(os.Getuid()) {
		t.Errorf("directive %+v, want one to pid %d with fps_max 20", got, pid)
	}
}

// waitSubscribed waits until the bus has a subscription whose name starts
// with prefix (a stream subscribes once its request arrives).
func waitSubscribed(t *testing.T, b *events.Bus, prefix string) *events.Stats {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, s := range b.Stats().Subscriptions {
			if strings.HasPrefix(s.Name, prefix) {
				return &s
			}
		}
	}
	t.Fatalf("no subscription %s* on the bus", prefix)
	return nil
}

// A live stream receives the events of its topics that pass its filter,
// in order, flushed as they come.
func TestEventsLive(t *testing.T) {
	d, c := eventsDaemon(t, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cases := []struct {
		name   string
		q      client.EventsQuery
		wantNs []int // payload n of the events expected, in order
	}{
		{"every topic", client.EventsQuery{Follow: true}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"one lane's cpu", client.EventsQuery{Topics: []string{"lane.video.cpu"}, Follow: true}, []int{0, 2, 4, 6, 8}},
		{"two patterns", client.EventsQuery{Topics: []string{"lane.*.cpu", "net.>"}, Follow: true}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"filter", client.EventsQuery{Filter: "payload.n >= 5 && topic.endsWith(\".cpu\")", Follow: true}, []int{5, 6, 7, 8, 9}},
		{"flush interval", client.EventsQuery{Follow: true, Flush: 20 * time.Millisecond}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.Events(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			waitSubscribed(t, d.bus, "api/events/")
			for n := 0; n < 10; n++ {
				topic := "lane.video.cpu"
				if n%2 == 1 {
					topic = "lane.web.cpu"
				}
				d.bus.Publish(events.Event{Source: "test", Topic: topic, Payload: map[string]any{"n": int64(n), "case": int64(i)}})
			}
			var last uint64
			for _, want := range tc.wantNs {
				ev, err := s.Next()
				if err != nil {
					t.Fatal(err)
				}
				if ev.Payload["n"] != float64(want) || ev.Payload["case"] != float64(i) || ev.Seq <= last {
					t.Fatalf("got %+v, want n=%d after seq %d", ev, want, last)
				}
				last = ev.Seq
			}
			s.Close()
			waitGone(t, d.bus, "api/events/")
		})
	}
}

// waitGone waits until no subscription's name starts with prefix.
func waitGone(t *testing.T, b *events.Bus, prefix string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		found := false
		for _, s := range b.Stats().Subscriptions {
			found = found || strings.HasPrefix(s.Name, prefix)
		}
		if !found {
			return
		}
	}
	t.Fatalf("subscription %s* still on the bus after its client left", prefix)
}

// since replays the history, then goes on live, while a publisher keeps
// publishing: every sequence number once, in order, no gap.
func TestEventsSinceNoGapNoDuplicate(t *testing.T) {
	d, c := eventsDaemon(t, 100000, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	publish := func(n int) {
		for i := 0; i < n; i++ {
			d.bus.Publish(events.Event{Source: "test", Topic: "lane.video.cpu", Payload: map[string]any{"usage": 0.5}})
		}
	}
	publish(3000)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		defer func() { done <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			publish(5)
			n += 5
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	s, err := c.Events(ctx, client.EventsQuery{Topics: []string{"lane.>"}, Since: "1h", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	total := 3000 + <-done
	for want := uint64(1); want <= uint64(total); want++ {
		ev, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Topic == api.TopicDropped {
			t.Fatalf("stream dropped events: %+v", ev)
		}
		if ev.Seq != want {
			t.Fatalf("got seq %d, want %d (gap or duplicate)", ev.Seq, want)
		}
	}
	t.Logf("%d events: history then live, in order", total)

	// follow=false: the history only, then the stream ends.
	h, err := c.Events(ctx, client.EventsQuery{Topics: []string{"lane.video.cpu"}, Since: time.Now().Add(-time.Hour).Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n := 0
	for {
		_, err := h.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != total {
		t.Errorf("history-only stream gave %d events, want %d", n, total)
	}
}

// Invalid parameters are refused with 400, naming the parameter, and for
// a filter the position in the expression.
func TestEventsBadParameters(t *testing.T) {
	_, c := eventsDaemon(t, 0, 0)
	ctx := context.Background()
	cases := []struct {
		name      string
		q         client.EventsQuery
		param     string
		msg       string
		line, col int
	}{
		{"bad pattern", client.EventsQuery{Topics: []string{"lane.>.cpu"}}, "topic", `">" must be the last token`, 0, 0},
		{"empty token", client.EventsQuery{Topics: []string{"lane..cpu"}}, "topic", "empty token", 0, 0},
		{"filter syntax", client.EventsQuery{Filter: "payload.fps < "}, "filter", "line 1 column 15", 1, 15},
		{"filter type", client.EventsQuery{Filter: "topic + 1"}, "filter", "line 1 column 7", 1, 7},
		{"filter not bool", client.EventsQuery{Filter: "topic"}, "filter", "want bool", 0, 0},
		{"filter unknown variable", client.EventsQuery{Filter: "\nfps > 1"}, "filter", "line 2 column 1: undeclared reference to 'fps'", 2, 1},
		{"since junk", client.EventsQuery{Since: "yesterday"}, "since", "neither an RFC 3339 time", 0, 0},
		{"since negative", client.EventsQuery{Since: "-5m"}, "since", "must not be negative", 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.Events(ctx, tc.q)
			if err == nil {
				s.Close()
				t.Fatal("stream opened")
			}
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != api.CodeBadRequest || ae.Param != tc.param || !strings.Contains(ae.Message, tc.msg) {
				t.Fatalf("got %#v, want bad-request on %s with %q", err, tc.param, tc.msg)
			}
			if ae.Line != tc.line || ae.Column != tc.col || (tc.param == "filter" && ae.Expr != tc.q.Filter) {
				t.Errorf("position %d:%d expr %q, want %d:%d %q", ae.Line, ae.Column, ae.Expr, tc.line, tc.col, tc.q.Filter)
			}
		})
	}
	// Raw parameters the client never sends.
	for _, raw := range []string{"?bogus=1", "?follow=maybe", "?filter=a&filter=b", "?flush=soon", "?flush=1s", "?flush=-1ms", "?flush=1ms&flush=2ms"} {
		resp, err := rawGet(c.Socket, api.RouteEvents+raw)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(resp, "HTTP/1.1 400") {
			t.Errorf("GET %s: %.60q, want 400", raw, resp)
		}
	}
}

// rawGet sends a GET over the socket and returns the start of the answer.
func rawGet(sock, path string) (string, error) {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: lanesd\r\n\r\n", path)
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	return string(buf[:n]), err
}

// A client that never reads does not hold up publishers: its stream's
// queue fills, the bus counts drops, and publishing stays fast.
func TestEventsStuckClient(t *testing.T) {
	d, c := eventsDaemon(t, 0, 0)
	conn, err := net.Dial("unix", c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s?follow=true HTTP/1.1\r\nHost: lanesd\r\n\r\n", api.RouteEvents)
	waitSubscribed(t, d.bus, "api/events/")
	payload := map[string]any{"text": strings.Repeat("x", 200)}
	const n = 200000
	start := time.Now()
	for i := 0; i < n; i++ {
		d.bus.Publish(events.Event{Source: "test", Topic: "lane.video.cpu", Payload: payload})
	}
	took := time.Since(start)
	st := waitSubscribed(t, d.bus, "api/events/")
	t.Logf("%d events published in %v (%v each) to a client that never reads: %d dropped, %d queued", n, took, took/n, st.Dropped, st.Queued)
	if st.Dropped < n/2 {
		t.Errorf("dropped %d of %d: the stuck stream should have dropped most", st.Dropped, n)
	}
	if per := took / n; per > 20*time.Microsecond {
		t.Errorf("publishing took %v an event with a stuck stream: the bus waited", per)
	}
}

// With flush, an event that comes within the interval after a write waits
// for the interval's end and goes in the next write; one after a quiet
// interval goes at once.
func TestEventsFlushHolds(t *testing.T) {
	d, c := eventsDaemon(t, 0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const flush = 200 * time.Millisecond
	s, err := c.Events(ctx, client.EventsQuery{Topics: []string{"lane.>"}, Follow: true, Flush: flush})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitSubscribed(t, d.bus, "api/events/")
	time.Sleep(flush + 50*time.Millisecond) // the stream's first write (its header) is old
	publish := func(n int) time.Time {
		d.bus.Publish(events.Event{Source: "test", Topic: "lane.video.cpu", Payload: map[string]any{"n": int64(n)}})
		return time.Now()
	}
	next := func(want int) time.Time {
		ev, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.Payload["n"] != float64(want) {
			t.Fatalf("got %+v, want n=%d", ev, want)
		}
		return time.Now()
	}
	sent0 := publish(0)
	got0 := next(0)
	if lat := got0.Sub(sent0); lat >= flush && !testutil.Emulated() {
		t.Errorf("an event after a quiet interval took %v, as long as the interval %v", lat, flush)
	}
	sent1 := publish(1)
	publish(2)
	got1 := next(1)
	next(2)
	// The write that carried n=0 began before got0; n=1 may not leave
	// before flush after it.
	if held := got1.Sub(got0); held < flush-20*time.Millisecond {
		t.Errorf("an event within the interval came %v after the write before it, want about %v", held, flush)
	}
	t.Logf("quiet: %v to the client; within the interval: %v after publishing", got0.Sub(sent0), got1.Sub(sent1))
}

// A client that stops reading for good is cut off once a write has waited
// streamWriteTimeout: its subscription leaves the bus.
func TestEventsStuckClientCut(t *testing.T) {
	d, c := eventsDaemon(t, 0, 0)
	old := streamWriteTimeout
	streamWriteTimeout = 300 * time.Millisecond
	t.Cleanup(func() { streamWriteTimeout = old })
	conn, err := net.Dial("unix", c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s?follow=true HTTP/1.1\r\nHost: lanesd\r\n\r\n", api.RouteEvents)
	waitSubscribed(t, d.bus, "api/events/")
	payload := map[string]any{"text": strings.Repeat("x", 1000)}
	// Enough to fill the socket's buffers many times over (a few MB).
	for i := 0; i < 20000; i++ {
		d.bus.Publish(events.Event{Source: "test", Topic: "lane.video.cpu", Payload: payload})
		if i%1000 == 999 {
			time.Sleep(10 * time.Millisecond) // let the stream write
		}
	}
	waitGone(t, d.bus, "api/events/")
}

// A report carries the caller's pid and uid; another uid's stream does
// not see it (app.<pid>.* events are root's and the owner's), though it
// sees its own.
func TestEventsAppPermission(t *testing.T) {
	if os.Getenv("LANES_EVENTS_HELPER") != "" {
		helperStreamAsCaller(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as nobody")
	}
	d, c := eventsDaemon(t, 0, 0)
	dir := t.TempDir()
	// nobody must reach the socket and the binary: open the test's
	// temporary directories (its own, removed after).
	for _, p := range []string{dir, filepath.Dir(dir), filepath.Dir(c.Socket), filepath.Dir(filepath.Dir(c.Socket))} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "daemon.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestEventsAppPermission$")
	cmd.Env = append(os.Environ(), "LANES_EVENTS_HELPER="+c.Socket)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	out := bufio.NewScanner(stdout)
	var lines []string
	next := func() string {
		for out.Scan() {
			l := out.Text()
			lines = append(lines, l)
			if strings.HasPrefix(l, "H:") {
				return l
			}
		}
		t.Fatalf("helper ended: %v\n%s", out.Err(), strings.Join(lines, "\n"))
		return ""
	}
	if l := next(); l != "H:ready" {
		t.Fatalf("helper said %q", l)
	}
	// root's report (pid of this test, uid 0), and a directive to it.
	if _, err := c.Report(ctx, api.ReportRequest{Metrics: map[string]float64{"fps": 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := PublishDirective(d.bus, "controller/test", os.Getpid(), map[string]any{"x": 1.0}); err != nil {
		t.Fatal(err)
	}
	// An event on app.* without a uid: root's only.
	d.bus.Publish(events.Event{Source: "test", Topic: "app.1.report", Payload: map[string]any{"fps": 1.0}})
	fmt.Fprintln(stdin, "go")
	l := next()
	want := "H:saw app." + strconv.Itoa(cmd.Process.Pid) + ".report uid=65534 first"
	if l != want {
		t.Fatalf("helper said %q, want %q (it saw another uid's app events)", l, want)
	}
	stdin.Close()
}

// helperStreamAsCaller runs as nobody: opens a stream of app.>, waits for
// "go", reports for itself, and says which event came first.
func helperStreamAsCaller(t *testing.T) {
	c := client.New(os.Getenv("LANES_EVENTS_HELPER"))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, err := c.Events(ctx, client.EventsQuery{Topics: []string{"app.>"}, Follow: true})
	if err != nil {
		fmt.Println("H:error", err)
		return
	}
	defer s.Close()
	// Not root: reporting for another process is refused.
	if _, err := c.Report(ctx, api.ReportRequest{Metrics: map[string]float64{"fps": 2}, PID: 1}); client.Code(err) != api.CodeForbidden {
		fmt.Println("H:error report for pid 1:", err)
		return
	}
	fmt.Println("H:ready")
	bufio.NewScanner(os.Stdin).Scan()
	if _, err := c.Report(ctx, api.ReportRequest{Metrics: map[string]float64{"fps": 2}}); err != nil {
		fmt.Println("H:error", err)
		return
	}
	ev, err := s.Next()
	if err != nil {
		fmt.Println("H:error", err)
		return
	}
	fmt.Printf("H:saw %s uid=%v first\n", ev.Topic, ev.Payload["uid"])
}

// The history writer keeps at most history events, none older than
// retention, whatever is published.
func TestHistoryRetention(t *testing.T) {
	d, _ := eventsDaemon(t, 100, time.Hour)
	for i := 0; i < 1000; i++ {
		d.bus.Publish(events.Event{Source: "test", Topic: "net.link.eth0", Payload: map[string]any{"up": true}})
	}
	// proc.* is not in the default history topics.
	for i := 0; i < 1000; i++ {
		d.bus.Publish(events.Event{Source: "test", Topic: "proc.exec", Payload: map[string]any{"pid": int64(i)}})
	}
	d.ev.hist.flush(context.Background())
	n, oldest, err := d.store.EventCount()
	if err != nil {
		t.Fatal(err)
	}
	if n != 100 {
		t.Errorf("history holds %d events, want 100", n)
	}
	recs, err := d.store.EventsAfter(0, time.Time{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 100 || recs[0].Seq != 901 || recs[99].Seq != 1000 || recs[0].Topic != "net.link.eth0" {
		t.Errorf("history %d events from #%d, want the newest 100 net.link events (901..1000)", len(recs), recs[0].Seq)
	}
	if time.Since(oldest) > time.Minute {
		t.Errorf("oldest %v", oldest)
	}
	t.Logf("written %d, pruned %d", d.ev.hist.written.Load(), d.ev.hist.pruned.Load())
}

// lane validates history_topics without linking the event engine: its
// rules must be events.ValidatePattern's.
func TestTopicPatternsAgree(t *testing.T) {
	for _, p := range []string{">", "*", "net.>", "lane.*.cpu", "app.123.report", "a:b-c_d", "", ".", "a.", ".a", "a..b", ">.a", "a.>.b", "a*", "a>", "a/b", "a b", "é", strings.Repeat("a", 257), "*.*.>"} {
		laneOK := lane.TopicPatternProblem(p) == ""
		evOK := events.ValidatePattern(p) == nil
		if laneOK != evOK {
			t.Errorf("pattern %q: lane says ok=%v, events says ok=%v", p, laneOK, evOK)
		}
	}
}

// Reports the daemon refuses: a bad body, or another process's pid from
// someone other than root.
func TestReportRefusals(t *testing.T) {
	_, c := eventsDaemon(t, 0, 0)
	ctx := context.Background()
	cases := []struct {
		name string
		req  api.ReportRequest
		code string
		msg  string
	}{
		{"no metrics", api.ReportRequest{}, api.CodeBadRequest, "no metrics given"},
		{"upper-case name", api.ReportRequest{Metrics: map[string]float64{"FPS": 1}}, api.CodeBadRequest, `metric "FPS": names are made of a-z 0-9 _`},
		{"reserved name", api.ReportRequest{Metrics: map[string]float64{"uid": 1}}, api.CodeBadRequest, `metric "uid": name is reserved`},
		{"min above max", api.ReportRequest{Metrics: map[string]float64{"fps": 1}, Targets: map[string]api.Target{"fps": {Min: ptr(30), Max: ptr(20)}}}, api.CodeBadRequest, `target for "fps": min 30 is above max 20`},
		{"target of no metric", api.ReportRequest{Metrics: map[string]float64{"fps": 1}, Targets: map[string]api.Target{"lat": {Min: ptr(1)}}}, api.CodeBadRequest, `target for "lat", which is not among the metrics`},
		{"clashing names", api.ReportRequest{Metrics: map[string]float64{"fps": 1, "fps_max": 2}, Targets: map[string]api.Target{"fps": {Max: ptr(3)}}}, api.CodeBadRequest, `metric "fps_max" clashes`},
		{"too many", api.ReportRequest{Metrics: manyMetrics(33)}, api.CodeBadRequest, "33 metrics, more than 32"},
		{"an exited pid (root)", api.ReportRequest{Metrics: map[string]float64{"fps": 1}, PID: 1 << 22}, api.CodeNoProcess, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Report(ctx, tc.req)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != tc.code || !strings.Contains(ae.Message, tc.msg) {
				t.Errorf("got %v, want %s with %q", err, tc.code, tc.msg)
			}
		})
	}
}

func manyMetrics(n int) map[string]float64 {
	m := map[string]float64{}
	for i := 0; i < n; i++ {
		m["m"+strconv.Itoa(i)] = float64(i)
	}
	return m
}

// `lanes events` against the daemon: the history as lines, a bad filter
// shown with a caret under the position.
func TestLanesEventsCommand(t *testing.T) {
	d, c := eventsDaemon(t, 1000, time.Hour)
	d.bus.Publish(events.Event{Source: "monitor/lane", Topic: "lane.video.cpu", Payload: map[string]any{"usage": 0.5, "throttled_frac": 0.0}})
	d.bus.Publish(events.Event{Source: "monitor/net", Topic: "net.link.eth0", Payload: map[string]any{"up": true, "oper": "up"}})
	d.ev.hist.flush(context.Background())
	// The history as `lanes status` shows it.
	if h := d.historyStatus(); h == nil || h.Events != 2 || h.Keep != 1000 || h.Retention != "1h0m0s" || h.Oldest.IsZero() || len(h.Topics) == 0 || h.Error != "" {
		t.Errorf("history status %+v, want 2 events, keep 1000, retention 1h, an oldest time and the topics", h)
	}
	var out, errOut strings.Builder
	cli.Stdout, cli.Stderr = &out, &errOut
	defer func() { cli.Stdout, cli.Stderr = os.Stdout, os.Stderr }()
	cases := []struct {
		args   []string
		code   int
		stdout []string // lines ending so, in order
		stderr string
	}{
		{[]string{"events"}, 0, []string{" monitor/lane lane.video.cpu throttled_frac=0 usage=0.5", " monitor/net net.link.eth0 oper=up up=true"}, ""},
		{[]string{"events", "--topic", "net.>"}, 0, []string{" monitor/net net.link.eth0 oper=up up=true"}, ""},
		{[]string{"events", "--since", "1h", "--json", "--filter", "payload.usage > 0.1"}, 0, []string{`"topic":"lane.video.cpu","payload":{"throttled_frac":0,"usage":0.5}}`}, ""},
		{[]string{"events", "--filter", "payload.usage >"}, 1, nil, "lanes: events: filter: line 1 column 16: Syntax error: mismatched input '<EOF>' …\n  payload.usage >\n                 ^\n"},
	}
	for _, tc := range cases {
		out.Reset()
		errOut.Reset()
		code := cli.Run(append(tc.args, "--socket", c.Socket), cli.Options{})
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if out.Len() == 0 {
			lines = nil
		}
		// stderr: "…" stands for text of cel-go's own.
		pre, post, _ := strings.Cut(tc.stderr, "…")
		ok := code == tc.code && len(lines) == len(tc.stdout) && strings.HasPrefix(errOut.String(), pre) && strings.HasSuffix(errOut.String(), post)
		for i := 0; ok && i < len(lines); i++ {
			ok = strings.HasSuffix(lines[i], tc.stdout[i])
		}
		if !ok {
			t.Errorf("lanes %v: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d, lines ending %q, stderr %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}
