package daemon

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// placeLogEvery is how often, at most, the rule placements of a lane are
// logged: a storm's batches (hundreds a second) are gathered into a line
// a second, while a placement after a quiet second is logged at once.
const placeLogEvery = time.Second

// placeLog gathers the log lines of rule placements. Safe for concurrent
// use.
type placeLog struct {
	mu    sync.Mutex
	last  time.Time
	lanes map[string]*placeLogLane
}

// placeLogLane is what waits to be logged of one lane.
type placeLogLane struct {
	n     int      // processes placed
	shown []string // the first few, described
}

// placeLogShown is how many placements a line describes.
const placeLogShown = 8

// add notes n placements into lane, the first of them described by
// shown, and logs what waits if the last line is placeLogEvery old.
func (p *placeLog) add(now time.Time, lane string, n int, shown []string, logf func(string, ...any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lanes == nil {
		p.lanes = map[string]*placeLogLane{}
	}
	l := p.lanes[lane]
	if l == nil {
		l = &placeLogLane{}
		p.lanes[lane] = l
	}
	l.n += n
	for _, s := range shown {
		if len(l.shown) < placeLogShown {
			l.shown = append(l.shown, s)
		}
	}
	p.flushLocked(now, false, logf)
}

// flush logs what waits if the last line is placeLogEvery old, or at once
// with force.
func (p *placeLog) flush(now time.Time, force bool, logf func(string, ...any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushLocked(now, force, logf)
}

func (p *placeLog) flushLocked(now time.Time, force bool, logf func(string, ...any)) {
	if len(p.lanes) == 0 || (!force && now.Sub(p.last) < placeLogEvery) {
		return
	}
	names := make([]string, 0, len(p.lanes))
	for n := range p.lanes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		l := p.lanes[name]
		shown := l.shown
		if l.n > len(shown) {
			shown = append(shown, fmt.Sprintf("and %d more", l.n-len(shown)))
		}
		logf("rules -> %s: %s", name, strings.Join(shown, ", "))
	}
	clear(p.lanes)
	p.last = now
}
