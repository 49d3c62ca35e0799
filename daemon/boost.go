package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/boost"
	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/monitor"
)

// boostTick is how often a lane in contact has its processes' socket
// counters read: the delay before a process that starts communicating
// gets its boost, and the resolution of time steps.
const boostTick = 100 * time.Millisecond

// boostRun is the priority boosting of one configuration's lanes (seed
// 000): a loop that takes contacts from net.connectivity events and the
// contact API, reads the boosting lanes' processes' socket counters while
// a contact is on, and sets the nice values the lanes' trackers ask for.
type boostRun struct {
	d      *Daemon
	cancel context.CancelFunc
	done   chan struct{}
	sub    *events.Subscription

	mu    sync.Mutex // guards lanes' trackers and what the kernel was given
	lanes []*boostLane
}

// boostLane is one boosting lane.
type boostLane struct {
	name string
	t    *boost.Tracker
	// slice is the EEVDF slice boosted threads get (0: theirs kept):
	// the policy's, or 0 where the kernel has no custom slices.
	slice  time.Duration
	source string
	errs   uint64
}

// describePolicy words a policy for lanes status.
func describePolicy(p boost.Policy) string {
	s := fmt.Sprintf("%s: nice %d", p.Kind, p.Initial)
	if p.Kind != boost.Static {
		every := fmt.Sprintf("%g %s", p.Every, p.Step)
		if p.Step == boost.Time {
			every = time.Duration(p.Every).String()
		}
		s += fmt.Sprintf(" to %d, a step every %s", p.Final, every)
	}
	s += fmt.Sprintf(", clamp %d, %s when the contact ends", p.Clamp, p.OnLeave)
	if p.Slice != 0 {
		s += fmt.Sprintf(", slice %v", p.Slice)
	}
	if p.From == boost.Start {
		s += ", and processes started in a contact or while the link was down before it, from their start"
	}
	return s
}

// startBoost starts boosting for cfg's lanes with a policy; a contact is
// on from the start when the host has connectivity. Callers hold applyMu.
func (d *Daemon) startBoost(cfg *lane.Config) {
	// Only the run stopped just before (a reload) is gone on from.
	wasDown := d.boostDown
	d.boostDown = nil
	var lanes []*boostLane
	for _, name := range cfg.Order {
		p := cfg.Lanes[name].Boost
		if p.Kind == "" {
			continue
		}
		t, err := boost.NewTracker(p)
		if err != nil { // the config checked it
			d.warnf("boost: lane %s: %v", name, err)
			continue
		}
		bl := &boostLane{name: name, t: t, slice: p.Slice}
		if p.Slice != 0 {
			if _, err := cpu.DefaultSlice(); err != nil {
				d.warnf("boost: lane %s: slice %v: %v (nice only)", name, p.Slice, err)
				bl.slice = 0
			}
		}
		lanes = append(lanes, bl)
	}
	if len(lanes) == 0 {
		return
	}
	sub, err := d.bus.Subscribe(events.Options{Name: "boost", Topics: []string{"net.connectivity"}, Queue: 16})
	if err != nil {
		d.warnf("boost: subscribe to net.connectivity: %v (contacts only from the API)", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	run := &boostRun{d: d, cancel: cancel, done: make(chan struct{}), sub: sub, lanes: lanes}
	if d.connUp.Load() {
		run.contact(true, nil, "net.connectivity")
	} else {
		// Under from = "start", a process started while lanesd waits
		// for the first contact counts from its start; after a reload,
		// one started since the link went down under the last config.
		now := time.Now()
		for _, bl := range lanes {
			since := now
			if t, ok := wasDown[bl.name]; ok && !t.IsZero() && t.Before(now) {
				since = t
			}
			bl.t.Down(since)
		}
	}
	go run.loop(ctx)
	d.boost = run
	d.boostView.Store(run)
	names := make([]string, len(lanes))
	for i, bl := range lanes {
		names[i] = bl.name + " (" + describePolicy(bl.t.Policy()) + ")"
	}
	d.logf("boost: %s; contacts from net.connectivity and %s", strings.Join(names, ", "), api.RouteContact)
}

// stopBoost stops the loop and gives every boosted process its own nice
// back. Callers hold applyMu.
func (d *Daemon) stopBoost() {
	run := d.boost
	if run == nil {
		return
	}
	d.boost = nil
	d.boostView.Store(nil)
	run.cancel()
	if run.sub != nil {
		run.sub.Close()
	}
	<-run.done
	run.mu.Lock()
	defer run.mu.Unlock()
	d.boostDown = map[string]time.Time{}
	for _, bl := range run.lanes {
		d.boostDown[bl.name] = bl.t.DownSince()
		run.apply(bl, bl.t.Undo())
	}
}

func (run *boostRun) loop(ctx context.Context) {
	defer close(run.done)
	evs := make(chan events.Event)
	if run.sub != nil {
		go func() {
			for {
				ev, err := run.sub.Next(ctx)
				if err != nil {
					return
				}
				select {
				case evs <- ev:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	tick := time.NewTicker(boostTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-evs:
			if up, ok := ev.Payload["up"].(bool); ok {
				run.contact(up, nil, "net.connectivity")
			}
		case <-tick.C:
			run.mu.Lock()
			run.sample(time.Now())
			run.mu.Unlock()
		}
	}
}

// contact begins or ends a contact for the named lanes (nil: all); it
// returns the lanes reached and the processes changed at once.
func (run *boostRun) contact(up bool, names []string, source string) (reached []string, changed int) {
	run.mu.Lock()
	defer run.mu.Unlock()
	now := time.Now()
	for _, bl := range run.lanes {
		if names != nil && !slices.Contains(names, bl.name) {
			continue
		}
		reached = append(reached, bl.name)
		if up == bl.t.InContact() {
			continue
		}
		bl.source = source
		if up {
			bl.t.Enter(now)
			run.d.bus.Publish(events.Event{Source: "lanesd", Topic: "boost." + bl.name, Payload: map[string]any{
				"lane": bl.name, "contact": true, "source": source}})
		} else {
			ch := bl.t.Leave(now)
			changed += len(ch)
			run.apply(bl, ch)
			run.d.bus.Publish(events.Event{Source: "lanesd", Topic: "boost." + bl.name, Payload: map[string]any{
				"lane": bl.name, "contact": false, "source": source, "restored": len(ch)}})
		}
	}
	if up {
		// The counters at the contact's start are its baseline.
		run.sample(now)
	}
	return reached, changed
}

// sample reads the socket counters of the processes of every lane in
// contact and applies what the trackers ask. Callers hold run.mu.
func (run *boostRun) sample(now time.Time) {
	var in []*boostLane
	for _, bl := range run.lanes {
		if bl.t.InContact() {
			in = append(in, bl)
		}
	}
	if len(in) == 0 {
		return
	}
	socks, err := monitor.ReadSockets()
	if err != nil {
		run.fail(in[0], "socket counters: %v", err)
		return
	}
	for _, bl := range in {
		pids, err := run.d.engine.Members(bl.name)
		if err != nil {
			run.fail(bl, "members: %v", err)
			continue
		}
		member := make(map[int]bool, len(pids))
		for _, pid := range pids {
			member[pid] = true
			c, err := socks.Process(pid)
			if err != nil {
				continue // exited
			}
			cnt := boost.Counters{Events: c.Events, Bytes: c.Bytes}
			if bl.t.Seen(pid) {
				if ch, ok := bl.t.Observe(now, pid, 0, cnt); ok {
					run.apply(bl, []boost.Change{ch})
				}
				continue
			}
			orig, err := cpu.ThreadNice(pid)
			if err != nil {
				continue
			}
			// Under from = "start" a process that started in the
			// contact counts from its start. The kernel gives the start
			// to a tick (10 ms): one whose tick ends after the contact
			// began counts (a program launched as the contact begins).
			started := now
			if bl.t.Policy().From == boost.Start {
				if started, err = procfs.Started(pid); err != nil {
					continue // exited
				}
				started = started.Add(time.Second / procfs.UserHZ)
			}
			if ch, ok := bl.t.Started(now, started, pid, orig, cnt); ok {
				run.apply(bl, []boost.Change{ch})
			}
		}
		for _, pid := range bl.t.PIDs() {
			if !member[pid] { // exited, or moved out of the lane
				if ch, ok := bl.t.Forget(pid); ok {
					run.apply(bl, []boost.Change{ch})
				}
			}
		}
	}
}

// apply sets the changes' nice values through enforce (which records
// each thread's own value first and gives it back on Restore) and
// publishes them on boost.<lane>.
func (run *boostRun) apply(bl *boostLane, changes []boost.Change) {
	for _, ch := range changes {
		var err error
		if ch.Restore {
			err = run.d.engine.Unboost(ch.PID)
		} else {
			err = run.d.engine.Boost(ch.PID, ch.Nice, bl.slice, bl.name)
		}
		if err != nil && !errors.Is(err, cpu.ErrGone) {
			run.fail(bl, "pid %d: nice %d: %v", ch.PID, ch.Nice, err)
		}
		payload := map[string]any{"lane": bl.name, "pid": ch.PID, "nice": ch.Nice, "restore": ch.Restore, "contact": bl.t.InContact()}
		if bl.slice != 0 && !ch.Restore {
			payload["slice_ns"] = int64(bl.slice)
		}
		run.d.bus.Publish(events.Event{Source: "lanesd", Topic: "boost." + bl.name, Payload: payload})
	}
}

// fail logs a boosting error at powers of two of the lane's error count.
func (run *boostRun) fail(bl *boostLane, format string, args ...any) {
	bl.errs++
	if bl.errs&(bl.errs-1) == 0 {
		run.d.warnf("boost: lane %s: %s (%d errors)", bl.name, fmt.Sprintf(format, args...), bl.errs)
	}
}

// status is the boosting lanes as lanes status shows them.
func (run *boostRun) status() []api.BoostLane {
	run.mu.Lock()
	defer run.mu.Unlock()
	out := make([]api.BoostLane, 0, len(run.lanes))
	for _, bl := range run.lanes {
		v := api.BoostLane{Lane: bl.name, Policy: describePolicy(bl.t.Policy()), Contact: bl.t.InContact(), Source: bl.source}
		for _, b := range bl.t.Boosted() {
			v.Boosted = append(v.Boosted, api.BoostedProc{PID: b.PID, Nice: b.Nice, Orig: b.Orig, Progress: b.Progress})
		}
		out = append(out, v)
	}
	return out
}

// boostStatus is lanes status's boost section (nil: no lane boosts).
func (d *Daemon) boostStatus() []api.BoostLane {
	if run := d.boostView.Load(); run != nil {
		return run.status()
	}
	return nil
}

// parseContact parses and validates the body of POST /v1/contact: lane
// names given once each (whether they boost is the config's to say).
func parseContact(body []byte) (api.ContactRequest, *api.Error) {
	var req api.ContactRequest
	if e := decode(body, &req); e != nil {
		return req, e
	}
	seen := map[string]bool{}
	for _, name := range req.Lanes {
		if name == "" {
			return req, api.Errorf(api.CodeBadRequest, "empty lane name")
		}
		if seen[name] {
			return req, api.Errorf(api.CodeBadRequest, "lane %q given twice", name)
		}
		seen[name] = true
	}
	return req, nil
}

// serveContact begins or ends a contact (seed 000's oracle). Every lane
// named must exist and have a boost policy, and to begin a contact have
// processes to boost; otherwise nothing changes.
func (d *Daemon) serveContact(w http.ResponseWriter, r *http.Request) (any, *api.Error) {
	if c := creds(r); !c.IsRoot() {
		return nil, api.Errorf(api.CodeForbidden, "only root may report a contact (caller uid %d)", c.UID)
	}
	body, e := readBody(r)
	if e != nil {
		return nil, e
	}
	req, e := parseContact(body)
	if e != nil {
		return nil, e
	}
	cfg := d.config()
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	run := d.boost
	if run == nil {
		return nil, api.Errorf(api.CodeBadRequest, "no lane has a boost policy ([lanes.NAME.boost] in %s)", d.configName())
	}
	for _, name := range req.Lanes {
		l, ok := cfg.Lanes[name]
		if !ok {
			return nil, api.Errorf(api.CodeUnknownLane, "unknown lane %q (lanes: %s)", name, strings.Join(cfg.Order, ", "))
		}
		if l.Boost.Kind == "" {
			return nil, api.Errorf(api.CodeBadRequest, "lane %s has no boost policy ([lanes.%s.boost])", name, name)
		}
		if req.Up {
			if pids, err := d.engine.Members(name); err == nil && len(pids) == 0 {
				return nil, api.Errorf(api.CodeBadRequest, "lane %s has no processes to boost", name)
			}
		}
	}
	var names []string
	if len(req.Lanes) > 0 {
		names = req.Lanes
	}
	reached, changed := run.contact(req.Up, names, "api")
	c := creds(r)
	d.logf("boost: contact %s for %s (reported by uid %d pid %d)", map[bool]string{true: "up", false: "down"}[req.Up], strings.Join(reached, ", "), c.UID, c.PID)
	return api.ContactResponse{Lanes: reached, Changed: changed}, nil
}
