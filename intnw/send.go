package intnw

import (
	"slices"
)

// sirob is an IROB being sent: its chunks are queued, in flight, or
// acknowledged.
type sirob struct {
	id     uint64
	label  Label
	deps   []uint64
	depAll bool
	next   uint64 // bytes chunked so far
	ended  bool   // End was called
	last   *chunk // its last chunk while it is still queued (End may mark it)
	open   int    // chunks queued or in flight
	want   int    // the path its foreground was last written for (-1: none)
}

// chunk is a piece of an IROB: queued (path < 0) or in flight on a path
// until the peer acknowledges it. A foreground chunk is for the path
// chosen when it was written (want; -1: the best when it is sent).
type chunk struct {
	ir   *sirob
	off  uint64
	data []byte
	end  bool
	path int
	want int
}

type chunkKey struct{ id, off uint64 }

// frame is the chunk's data frame.
func (c *chunk) frame() *frame {
	f := &frame{typ: tData, label: c.ir.label, id: c.ir.id, off: c.off, data: c.data}
	if c.end {
		f.flags |= flagEnd
	}
	if c.off == 0 {
		f.deps = c.ir.deps
		if c.ir.depAll {
			f.flags |= flagDepAll
		}
	}
	return f
}

// sender holds what the multi-socket sends until the peer acknowledges it:
// a FIFO of queued chunks per label, and the chunks in flight.
type sender struct {
	nextID   uint64
	queues   [numLabels][]*chunk
	inflight map[chunkKey]*chunk
	// unacked is the bytes queued or in flight.
	unacked int
	// bytes is the bytes queued per label (not yet given to a path).
	bytes [numLabels]int
}

func newSender() *sender { return &sender{nextID: 1, inflight: map[chunkKey]*chunk{}} }

// chunkSize is how a label's data is cut: background in pieces small
// enough to stripe over paths and to fit under the anticipatory bound,
// foreground in larger ones (it is not striped).
func chunkSize(l Label) int {
	if l.Foreground() {
		return 64 << 10
	}
	return 16 << 10
}

// write queues data as chunks of ir for path want (-1: any).
func (s *sender) write(ir *sirob, data []byte, want int) {
	size := chunkSize(ir.label)
	ir.want = want
	for len(data) > 0 {
		n := min(len(data), size)
		c := &chunk{ir: ir, off: ir.next, data: slices.Clone(data[:n]), path: -1, want: want}
		data = data[n:]
		ir.next += uint64(n)
		ir.open++
		ir.last = c
		s.queues[ir.label] = append(s.queues[ir.label], c)
		s.unacked += n
		s.bytes[ir.label] += n
	}
}

// end marks ir's end: on its last chunk if that is still queued, or in a
// chunk of no bytes.
func (s *sender) end(ir *sirob) {
	ir.ended = true
	if ir.last != nil && ir.last.path < 0 && ir.last.off+uint64(len(ir.last.data)) == ir.next {
		ir.last.end = true
		return
	}
	c := &chunk{ir: ir, off: ir.next, end: true, path: -1, want: ir.want}
	ir.open++
	ir.last = c
	s.queues[ir.label] = append(s.queues[ir.label], c)
}

// take removes the first chunk of label l's queue for path p, or, when
// most > 0 and the chunk is longer, cuts its first most bytes off as a
// chunk of their own (the rest stays first in the queue).
func (s *sender) take(l Label, p, most int) *chunk {
	c := s.queues[l][0]
	if most > 0 && len(c.data) > most {
		piece := &chunk{ir: c.ir, off: c.off, data: c.data[:most:most], path: p, want: c.want}
		c.off += uint64(most)
		c.data = c.data[most:]
		c.ir.open++
		s.bytes[l] -= most
		s.inflight[chunkKey{piece.ir.id, piece.off}] = piece
		return piece
	}
	s.queues[l][0] = nil
	s.queues[l] = s.queues[l][1:]
	s.bytes[l] -= len(c.data)
	c.path = p
	if c.ir.last == c {
		c.ir.last = nil
	}
	s.inflight[chunkKey{c.ir.id, c.off}] = c
	return c
}

// ack drops an acknowledged chunk and returns it (nil if it was not in
// flight: acknowledged already, or a peer's mistake).
func (s *sender) ack(a ackEntry) *chunk {
	k := chunkKey{a.ID, a.Off}
	c := s.inflight[k]
	if c == nil || uint32(len(c.data)) != a.Len {
		return nil
	}
	delete(s.inflight, k)
	c.ir.open--
	s.unacked -= len(c.data)
	return c
}

// requeue puts the chunks in flight on path p back at the head of their
// queues, in the order they were cut, and returns how many.
func (s *sender) requeue(p int) int {
	var back [numLabels][]*chunk
	for k, c := range s.inflight {
		if c.path == p {
			delete(s.inflight, k)
			c.path = -1
			back[c.ir.label] = append(back[c.ir.label], c)
			s.bytes[c.ir.label] += len(c.data)
		}
	}
	n := 0
	for l := range back {
		slices.SortFunc(back[l], func(a, b *chunk) int {
			if a.ir.id != b.ir.id {
				return cmpU64(a.ir.id, b.ir.id)
			}
			return cmpU64(a.off, b.off)
		})
		n += len(back[l])
		s.queues[l] = append(back[l], s.queues[l]...)
	}
	return n
}

// queued says whether label l has a chunk waiting.
func (s *sender) queued(l Label) bool { return len(s.queues[l]) > 0 }

// idle says whether nothing is queued or in flight.
func (s *sender) idle() bool {
	for l := range s.queues {
		if len(s.queues[l]) > 0 {
			return false
		}
	}
	return len(s.inflight) == 0
}
