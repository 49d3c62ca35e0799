package intnw

import (
	"slices"
)

// Message is one IROB as the receiver delivers it: whole, and only after
// every IROB it depends on.
type Message struct {
	ID    uint64
	Label Label
	Data  []byte
}

// span is a byte range [off, end).
type span struct{ off, end uint64 }

// rirob is an IROB being received.
type rirob struct {
	label     Label
	depsKnown bool // its first chunk (offset 0) arrived
	depAll    bool
	deps      []uint64
	total     uint64 // its length, once the chunk with flagEnd arrived
	ended     bool
	have      []span // received ranges, sorted, disjoint, not touching
	data      []byte
}

// complete says whether every byte and the dependencies have arrived.
func (r *rirob) complete() bool {
	if !r.ended || !r.depsKnown {
		return false
	}
	if r.total == 0 {
		return true
	}
	return len(r.have) == 1 && r.have[0].off == 0 && r.have[0].end == r.total
}

// add merges [off, end) into the received ranges and returns how many
// bytes were new.
func (r *rirob) add(off, end uint64) uint64 {
	if off == end {
		return 0
	}
	var out []span
	n := end - off
	merged := span{off, end}
	for _, s := range r.have {
		switch {
		case s.end < merged.off || s.off > merged.end:
			out = append(out, s)
		default:
			lo, hi := max(s.off, merged.off), min(s.end, merged.end)
			if hi > lo {
				n -= hi - lo
			}
			merged = span{min(s.off, merged.off), max(s.end, merged.end)}
		}
	}
	out = append(out, merged)
	slices.SortFunc(out, func(a, b span) int { return cmpU64(a.off, b.off) })
	r.have = out
	return n
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// receiver reassembles IROBs from chunks that may come over any path, in
// any order and more than once, and delivers each IROB once: whole, after
// the IROBs it depends on, foreground before background and by id within
// each.
type receiver struct {
	irobs map[uint64]*rirob
	// Delivered IROBs: every id up to low, and those in above.
	low   uint64
	above map[uint64]bool
	// buffered is the bytes held for IROBs not yet delivered.
	buffered int
}

func newReceiver() *receiver {
	return &receiver{irobs: map[uint64]*rirob{}, above: map[uint64]bool{}}
}

func (r *receiver) delivered(id uint64) bool { return id <= r.low || r.above[id] }

// chunk takes one data frame. It returns a *ProtocolError for a chunk
// that contradicts what came before; any other chunk is to be
// acknowledged, a duplicate of what was delivered too (its sender may not
// have heard).
func (r *receiver) chunk(f *frame) error {
	if r.delivered(f.id) {
		return nil
	}
	ir := r.irobs[f.id]
	if ir == nil {
		ir = &rirob{label: f.label}
		r.irobs[f.id] = ir
	}
	end := f.off + uint64(len(f.data))
	switch {
	case ir.label != f.label:
		return protoErr("IROB %d: a chunk labelled %v after %v", f.id, f.label, ir.label)
	case ir.ended && end > ir.total:
		return protoErr("IROB %d: bytes up to %d beyond its end at %d", f.id, end, ir.total)
	case f.flags&flagEnd != 0 && ir.ended && end != ir.total:
		return protoErr("IROB %d: ends at %d and at %d", f.id, ir.total, end)
	case f.flags&flagEnd != 0 && len(ir.have) > 0 && ir.have[len(ir.have)-1].end > end:
		return protoErr("IROB %d: ends at %d below bytes received up to %d", f.id, end, ir.have[len(ir.have)-1].end)
	case f.off == 0 && ir.depsKnown && (ir.depAll != (f.flags&flagDepAll != 0) || !slices.Equal(ir.deps, f.deps)):
		return protoErr("IROB %d: its first chunk again with other dependencies", f.id)
	}
	if f.off == 0 && !ir.depsKnown {
		ir.depsKnown, ir.depAll, ir.deps = true, f.flags&flagDepAll != 0, slices.Clone(f.deps)
	}
	if f.flags&flagEnd != 0 {
		ir.ended, ir.total = true, end
	}
	if uint64(len(ir.data)) < end {
		if uint64(cap(ir.data)) >= end {
			ir.data = ir.data[:end]
		} else {
			grown := make([]byte, end, max(end, 2*uint64(cap(ir.data))))
			copy(grown, ir.data)
			ir.data = grown
		}
	}
	copy(ir.data[f.off:end], f.data)
	r.buffered += int(ir.add(f.off, end))
	return nil
}

// ready says whether a complete IROB may be delivered now.
func (r *receiver) ready(id uint64, ir *rirob) bool {
	if !ir.complete() {
		return false
	}
	if ir.depAll && r.low < id-1 {
		return false
	}
	for _, d := range ir.deps {
		if !r.delivered(d) {
			return false
		}
	}
	return true
}

// next takes the IROB to deliver now, if any: foreground before
// background, the lowest id first within each.
func (r *receiver) next() (Message, bool) {
	var best uint64
	var bir *rirob
	for id, ir := range r.irobs {
		if !r.ready(id, ir) {
			continue
		}
		if bir == nil || (ir.label.Foreground() && !bir.label.Foreground()) ||
			(ir.label.Foreground() == bir.label.Foreground() && id < best) {
			best, bir = id, ir
		}
	}
	if bir == nil {
		return Message{}, false
	}
	delete(r.irobs, best)
	r.buffered -= len(bir.data)
	r.above[best] = true
	for r.above[r.low+1] {
		delete(r.above, r.low+1)
		r.low++
	}
	return Message{ID: best, Label: bir.label, Data: bir.data[:bir.total]}, true
}
