package monitor

import "testing"

// parseDatagram, parseEvent and parseAck never panic on what a netlink
// socket may hand them, and what they accept is well-formed (seed corpus:
// testdata/fuzz/FuzzParseEvent).
func FuzzParseEvent(f *testing.F) {
	f.Add(cnProcMsg(1, 0, procEventFork, 10, 10, 11, 11))
	f.Add(cnProcMsg(1, 0, procEventExec, 11, 11))
	f.Add(cnProcMsg(1, 0, procEventExit, 11, 11, 3<<8, 17, 10, 10))
	f.Add(cnProcMsg(77, 43, procEventNone, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// As a datagram: every payload lies within it.
		parseDatagram(b, func(p []byte) {
			if len(p) > len(b)-nlmsgHdrLen {
				t.Fatalf("payload of %d bytes from a datagram of %d", len(p), len(b))
			}
			parseEvent(p)
			parseAck(p)
		})
		ev, ok := parseEvent(b)
		if ok {
			if len(b) < cnMsgLen+procEventHdr {
				t.Fatalf("event %+v from %d bytes, shorter than the headers", ev, len(b))
			}
			switch ev.Kind {
			case Fork, Exec, Exit:
			default:
				t.Fatalf("event of kind %v from %x", ev.Kind, b)
			}
			if ev.Kind == Exec {
				// Encoding it again gives the same event.
				again, ok := parseEvent(cnProcMsg(1, 0, procEventExec, uint32(int32(ev.PID)), uint32(int32(ev.TGID))))
				if !ok || again != ev {
					t.Fatalf("%+v encoded again parses as %+v, %v", ev, again, ok)
				}
			}
		} else if ev != (Event{}) {
			t.Fatalf("rejected message gave event %+v", ev)
		}
		if _, _, ok := parseAck(b); ok {
			if len(b) < cnMsgLen+procEventHdr+4 {
				t.Fatalf("ack from %d bytes", len(b))
			}
			if _, isEv := parseEvent(b); isEv {
				t.Fatalf("%x is both an ack and an event", b)
			}
		}
	})
}
