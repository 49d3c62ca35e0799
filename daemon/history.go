package daemon

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// eventsRun is the daemon's part of the event channels besides the bus:
// the history writer and the context that ends the API's streams when
// the daemon stops.
type eventsRun struct {
	// run identifies this daemon run in the history (sequence numbers
	// restart with every run).
	run    int64
	ctx    context.Context
	cancel context.CancelFunc
	hist   *historyWriter // nil: no history ([events] history = 0)
}

// Batching of the history writer: it wakes every historyPeriod and writes
// what its subscription queued, historyBatch events per transaction.
const (
	historyPeriod = 200 * time.Millisecond
	historyBatch  = 512
	// historyQueue holds what arrives between two wake-ups (50k events/s
	// for historyPeriod); beyond it events miss the history, counted.
	historyQueue = 10000
)

// startEvents starts the history writer (when the config keeps a history)
// and returns what stops it and ends the streams.
func (d *Daemon) startEvents(cfg *lane.Config) (*eventsRun, error) {
	ctx, cancel := context.WithCancel(context.Background())
	ev := &eventsRun{run: time.Now().UnixNano(), ctx: ctx, cancel: cancel}
	if cfg.Events.History > 0 && d.store != nil {
		sub, err := d.bus.Subscribe(events.Options{Name: "history", Topics: cfg.Events.HistoryTopics,
			Queue: historyQueue, Drop: events.DropNewest})
		if err != nil {
			cancel()
			return nil, err
		}
		h := &historyWriter{store: d.store, sub: sub, run: ev.run, logf: d.logf,
			limits: func() (int, time.Duration) {
				c := d.config()
				return c.Events.History, c.Events.Retention
			},
			req: make(chan chan struct{}), done: make(chan struct{})}
		ev.hist = h
		go h.loop(ctx)
	}
	return ev, nil
}

// stop ends the streams and writes what the history writer still holds.
func (ev *eventsRun) stop() {
	if ev == nil {
		return
	}
	ev.cancel()
	if ev.hist != nil {
		<-ev.hist.done
	}
}

// historyWriter copies the events of its topics into the state database.
type historyWriter struct {
	store  *state.Store
	sub    *events.Subscription
	run    int64
	logf   func(string, ...any)
	limits func() (keep int, maxAge time.Duration)
	req    chan chan struct{}
	done   chan struct{}

	written, pruned, failed atomic.Uint64
	batch                   []state.EventRecord
}

func (h *historyWriter) loop(ctx context.Context) {
	defer close(h.done)
	defer h.sub.Close()
	t := time.NewTicker(historyPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			h.drain()
			return
		case <-t.C:
			h.drain()
		case reply := <-h.req:
			h.drain()
			close(reply)
		}
	}
}

// flush writes everything the writer's subscription holds now and returns
// once it is committed (or ctx ends, or the writer stopped).
func (h *historyWriter) flush(ctx context.Context) {
	reply := make(chan struct{})
	select {
	case h.req <- reply:
	case <-h.done:
		return
	case <-ctx.Done():
		return
	}
	select {
	case <-reply:
	case <-ctx.Done():
	}
}

// drain writes what is queued now, historyBatch events per transaction:
// no more, so that a publisher faster than the database cannot keep it
// from answering a flush (what it leaves waits for the next tick).
func (h *historyWriter) drain() {
	left := h.sub.Stats().Queued
	for left > 0 {
		h.batch = h.batch[:0]
		for len(h.batch) < historyBatch && left > 0 {
			left--
			ev, ok := h.sub.TryNext()
			if !ok {
				break
			}
			data, err := json.Marshal(ev)
			if err != nil {
				h.failed.Add(1)
				continue
			}
			h.batch = append(h.batch, state.EventRecord{Run: h.run, Seq: ev.Seq, Time: ev.Time, Topic: ev.Topic, Data: data})
		}
		if len(h.batch) == 0 {
			return
		}
		keep, age := h.limits()
		if keep <= 0 {
			// history turned off by a reload: drop what comes.
			continue
		}
		n, err := h.store.AppendEvents(h.batch, keep, age, time.Now())
		if err != nil {
			h.failed.Add(uint64(len(h.batch)))
			h.logf("events: history: %v", err)
		} else {
			h.written.Add(uint64(len(h.batch)))
			h.pruned.Add(uint64(n))
		}
	}
}
