package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/events"
)

// The event streams of the local API (issue 14, point 3): GET /v1/events
// and GET /v1/directives send events as newline-delimited JSON, one bus
// subscription per stream, history first when asked.

// Stream limits.
const (
	// streamQueue is a stream's subscription queue (drop-newest): a client
	// that falls this far behind loses events and is told in-band.
	streamQueue = 4096
	// streamBatch is the most events written between two flushes.
	streamBatch = 64
	// maxStreamTopics bounds a stream's topic patterns.
	maxStreamTopics = 32
	// historyPage is how many history rows a stream reads at a time.
	historyPage = 512
	// maxStreamFlush bounds a stream's flush interval: at 10,000 events/s
	// the 4096-event queue holds 400 ms, so a stream held back longer
	// would drop events while it waits.
	maxStreamFlush = 250 * time.Millisecond
)

// streamWriteTimeout ends a stream whose client has not taken a flush's
// bytes for this long (its socket buffer full): a client stopped for good
// (a suspended pager, a dead peer the kernel has not noticed) holds no
// goroutine and connection forever. A variable for the test.
var streamWriteTimeout = time.Minute

// streamParams is what a stream sends: events on topics that pass out (a
// CEL filter, the caller's own and the permission check), from since
// (with history) and then live if follow.
type streamParams struct {
	topics  []string
	filter  string // the caller's filter, "" for none
	since   time.Time
	history bool // replay the history from since first
	follow  bool
	// flush is the least time between two writes to the client: events
	// that come sooner wait for the next write (at most flush), so that a
	// busy stream costs one write per interval rather than one per burst.
	// 0: every burst is written at once.
	flush time.Duration
}

// parseEventsQuery validates GET /v1/events' parameters: topic
// (repeatable patterns, default ">"), filter (CEL, bool), since (RFC 3339
// or a duration before now), follow (bool, default true; false: history
// only, then end), flush (a duration from 0 to maxStreamFlush, default 0).
// Errors name the parameter, and for a filter where.
func parseEventsQuery(q url.Values, now time.Time) (streamParams, *api.Error) {
	p := streamParams{follow: true}
	bad := func(param, format string, args ...any) *api.Error {
		return &api.Error{Code: api.CodeBadRequest, Param: param, Message: param + ": " + fmt.Sprintf(format, args...)}
	}
	for _, k := range sortedNames(q) {
		switch k {
		case "topic", "filter", "since", "follow", "flush":
			if k != "topic" && len(q[k]) > 1 {
				return p, bad(k, "given %d times, want once", len(q[k]))
			}
		default:
			return p, bad(k, "unknown parameter (want topic, filter, since, follow or flush)")
		}
	}
	p.topics = q["topic"]
	if len(p.topics) == 0 {
		p.topics = []string{">"}
	}
	if len(p.topics) > maxStreamTopics {
		return p, bad("topic", "%d patterns, more than %d", len(p.topics), maxStreamTopics)
	}
	for _, t := range p.topics {
		if err := events.ValidatePattern(t); err != nil {
			return p, bad("topic", "%v", err)
		}
	}
	if f := q.Get("filter"); q.Has("filter") {
		if _, err := events.CompileFilter(f); err != nil {
			e := bad("filter", "%v", err)
			var xe *events.ExprError
			if errors.As(err, &xe) {
				e.Message = fmt.Sprintf("filter: %s", xe.Reason)
				if xe.Line > 0 {
					e.Message = fmt.Sprintf("filter: line %d column %d: %s", xe.Line, xe.Column, xe.Reason)
				}
				e.Expr, e.Line, e.Column = f, xe.Line, xe.Column
			}
			return p, e
		}
		p.filter = f
	}
	if s := q.Get("since"); q.Has("since") {
		t, err := ParseSince(s, now)
		if err != nil {
			return p, bad("since", "%v", err)
		}
		p.since, p.history = t, true
	}
	if s := q.Get("follow"); q.Has("follow") {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return p, bad("follow", "%q is not a boolean (true or false)", s)
		}
		p.follow = b
	}
	if s := q.Get("flush"); q.Has("flush") {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return p, bad("flush", "%q is not a duration (e.g. 5ms)", s)
		case d < 0 || d > maxStreamFlush:
			return p, bad("flush", "%s is outside 0 to %s", s, maxStreamFlush)
		}
		p.flush = d
	}
	if !p.follow {
		// History only: all of it unless since says from when.
		p.history = true
	}
	return p, nil
}

// ParseSince reads a stream's start: an RFC 3339 time, or a duration
// before now ("10m", "1h30m").
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2006-01-02T15:04:05Z) nor a duration (10m)", s)
	}
	if d < 0 {
		return time.Time{}, fmt.Errorf("%q: a duration before now must not be negative", s)
	}
	return now.Add(-d), nil
}

// permFilter is the CEL condition a caller's stream adds to its filter:
// app.<pid>.* events only for root or the uid recorded in their payload
// (reports carry it; directives are published with it, PublishDirective).
// "" for root.
func permFilter(c callerCreds) string {
	if c.root {
		return ""
	}
	if c.uid < 0 {
		return `!topic.startsWith("app.")`
	}
	return fmt.Sprintf(`!topic.startsWith("app.") || (has(payload.uid) && payload.uid == %d)`, c.uid)
}

type callerCreds struct {
	root bool
	uid  int
}

// outFilter joins the caller's filter and the permission condition into
// the subscription's OUT filter ("" for none). The caller's expression is
// compiled alone first (parseEventsQuery), so errors point into it.
func outFilter(user, perm string) string {
	switch {
	case user == "":
		return perm
	case perm == "":
		return user
	}
	// The newline ends a // comment at the end of the user's expression.
	return "(" + perm + ") && (" + user + "\n)"
}

func (d *Daemon) serveEvents(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	p, e := parseEventsQuery(r.URL.Query(), time.Now())
	if e != nil {
		return nil, e
	}
	c := creds(r)
	return d.stream(w, r, p, fmt.Sprintf("api/events/uid%d/pid%d", c.UID, c.PID))
}

// streamed is what a streaming handler returns: the response is written.
type streamed struct{}

// stream subscribes, sends the history (if asked), then live events until
// the client goes away, the daemon stops, or (follow false) the history
// ends. A stream never holds up the bus: its queue is bounded, and what
// does not fit is dropped, counted and announced in-band (TopicDropped).
func (d *Daemon) stream(w http.ResponseWriter, r *http.Request, p streamParams, name string) (any, *api.Error) {
	if d.bus == nil {
		return nil, api.Errorf(api.CodeInternal, "the event channels are not running")
	}
	c := creds(r)
	out := outFilter(p.filter, permFilter(callerCreds{root: c.IsRoot(), uid: c.UID}))
	var match *events.Filter
	if out != "" {
		var err error
		if match, err = events.CompileFilter(out); err != nil {
			return nil, api.Errorf(api.CodeInternal, "stream filter: %v", err)
		}
	}
	var sub *events.Subscription
	if p.follow {
		var err error
		sub, err = d.bus.Subscribe(events.Options{Name: name, Topics: p.topics, Out: out, Queue: streamQueue, Drop: events.DropNewest})
		if err != nil {
			if errors.Is(err, events.ErrClosed) {
				return nil, api.Errorf(api.CodeInternal, "the daemon is stopping")
			}
			return nil, api.Errorf(api.CodeInternal, "subscribe: %v", err)
		}
		defer sub.Close()
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if ev := d.ev; ev != nil {
		stop := context.AfterFunc(ev.ctx, cancel)
		defer stop()
	}

	w.Header().Set("Content-Type", api.ContentNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{rc: http.NewResponseController(w), bw: bufio.NewWriterSize(w, 32<<10)}

	// History first: everything the history holds from since, then (live)
	// only what came after it.
	var h *replay
	if p.history && d.ev != nil && d.ev.hist != nil {
		h = &replay{d: d, p: p, match: match, run: d.ev.run}
		d.ev.hist.flush(ctx)
		if err := h.send(ctx, sw, 0); err != nil {
			return streamed{}, nil
		}
	}
	if err := sw.flush(); err != nil || !p.follow {
		return streamed{}, nil
	}
	var dropped uint64
	// dropNote announces in-band the events the stream's queue dropped
	// since the last note.
	dropNote := func() error {
		st := sub.Stats()
		if st.Dropped <= dropped {
			return nil
		}
		note := events.Event{Time: time.Now(), Source: "lanesd/api", Topic: api.TopicDropped,
			Payload: map[string]any{"dropped": st.Dropped - dropped, "total": st.Dropped}}
		dropped = st.Dropped
		return sw.write(&note)
	}
	var hold *time.Timer
	first := true
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			sw.flush()
			return streamed{}, nil
		}
		if first && h != nil {
			// Events published before this stream subscribed but not yet
			// in the history when it was read: from the history now.
			first = false
			if ev.Seq > h.lastSeq+1 {
				d.ev.hist.flush(ctx)
				if h.send(ctx, sw, ev.Seq) != nil {
					return streamed{}, nil
				}
			}
		}
		n := 0
		for {
			if h == nil || ev.Seq > h.lastSeq {
				if sw.write(&ev) != nil {
					return streamed{}, nil
				}
				n++
			}
			if n >= streamBatch {
				break
			}
			var ok bool
			if ev, ok = sub.TryNext(); !ok {
				// A publisher often publishes several events at once (a
				// monitor's tick): let it finish before flushing, so that
				// they go in one write rather than one each.
				runtime.Gosched()
				if ev, ok = sub.TryNext(); !ok {
					break
				}
			}
		}
		if dropNote() != nil {
			return streamed{}, nil
		}
		if p.flush > 0 {
			// Hold the write until flush after the last one; what comes
			// meanwhile goes in the same write.
			if wait := p.flush - time.Since(sw.last); wait > 0 {
				if hold == nil {
					hold = time.NewTimer(wait)
					defer hold.Stop()
				} else {
					hold.Reset(wait)
				}
				select {
				case <-ctx.Done():
					sw.flush()
					return streamed{}, nil
				case <-hold.C:
				}
				for {
					ev, ok := sub.TryNext()
					if !ok {
						break
					}
					if h != nil && ev.Seq <= h.lastSeq {
						continue
					}
					if sw.write(&ev) != nil {
						return streamed{}, nil
					}
				}
				if dropNote() != nil {
					return streamed{}, nil
				}
			}
		}
		if sw.flush() != nil {
			return streamed{}, nil
		}
	}
}

// streamWriter writes events as NDJSON and pushes them to the client.
type streamWriter struct {
	rc  *http.ResponseController
	bw  *bufio.Writer
	buf []byte
	// last is when the last flush began; deadline the write deadline
	// it set (renewed when less than 9/10 of streamWriteTimeout remains,
	// not on every flush).
	last, deadline time.Time
}

func (s *streamWriter) write(e *events.Event) error {
	s.buf = appendEventJSON(s.buf[:0], e)
	_, err := s.bw.Write(s.buf)
	return err
}

func (s *streamWriter) writeRaw(line []byte) error {
	if _, err := s.bw.Write(line); err != nil {
		return err
	}
	return s.bw.WriteByte('\n')
}

func (s *streamWriter) flush() error {
	now := time.Now()
	s.last = now
	if s.deadline.Sub(now) < streamWriteTimeout*9/10 {
		// An error here (a connection that cannot have deadlines) leaves
		// the stream without one, as before.
		s.deadline = now.Add(streamWriteTimeout)
		_ = s.rc.SetWriteDeadline(s.deadline)
	}
	if err := s.bw.Flush(); err != nil {
		return err
	}
	return s.rc.Flush()
}

// replay sends a stream's part of the history.
type replay struct {
	d       *Daemon
	p       streamParams
	match   *events.Filter
	run     int64
	afterID int64
	// lastSeq is the highest sequence number of this run sent from the
	// history: live events up to it were sent already.
	lastSeq uint64
}

// send sends the history rows after the last one read, from since, that
// match the stream; with before > 0 only this run's events below before.
func (h *replay) send(ctx context.Context, sw *streamWriter, before uint64) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, err := h.d.store.EventsAfter(h.afterID, h.p.since, historyPage)
		if err != nil {
			h.d.logf("events: %v", err)
			return nil // the live stream goes on without history
		}
		for _, rec := range recs {
			h.afterID = rec.ID
			if before > 0 && (rec.Run != h.run || rec.Seq >= before) {
				continue
			}
			if !slices.ContainsFunc(h.p.topics, func(p string) bool { return events.Match(p, rec.Topic) }) {
				continue
			}
			if rec.Run == h.run && rec.Seq <= h.lastSeq {
				continue
			}
			if h.match != nil {
				var ev events.Event
				if json.Unmarshal(rec.Data, &ev) != nil {
					continue
				}
				if ok, err := h.match.Match(&ev); !ok || err != nil {
					continue
				}
			}
			if err := sw.writeRaw(rec.Data); err != nil {
				return err
			}
			if rec.Run == h.run && rec.Seq > h.lastSeq {
				h.lastSeq = rec.Seq
			}
		}
		if err := sw.flush(); err != nil {
			return err
		}
		if len(recs) < historyPage {
			return nil
		}
	}
}
