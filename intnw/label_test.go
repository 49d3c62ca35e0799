package intnw

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestParseLabel(t *testing.T) {
	tests := []struct {
		in   string
		want Label
		err  string
	}{
		{"fg-small", FGSmall, ""},
		{"FG-Large", FGLarge, ""},
		{" background large ", BGLarge, ""},
		{"bg_small", BGSmall, ""},
		{"foreground-small", FGSmall, ""},
		{"urgent", 0, `label "urgent": want fg-small, fg-large, bg-small or bg-large`},
		{"", 0, `label "": want`},
	}
	for _, tt := range tests {
		got, err := ParseLabel(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseLabel(%q): %v, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseLabel(%q): %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for l := Label(0); l < numLabels; l++ {
		if got, err := ParseLabel(l.String()); err != nil || got != l {
			t.Errorf("%v does not round-trip: %v, %v", l, got, err)
		}
	}
	if Label(4).Valid() || Label(4).String() != "label(4)" {
		t.Errorf("label 4: valid %v, %q", Label(4).Valid(), Label(4).String())
	}
}

func TestFrameRoundTrip(t *testing.T) {
	frames := []*frame{
		{typ: tData, label: BGLarge, flags: flagEnd | flagDepAll, id: 7, off: 0, deps: []uint64{1, 5}, data: []byte("hello")},
		{typ: tData, label: FGSmall, id: 9, off: 4096, data: bytes.Repeat([]byte{1}, 3000)},
		{typ: tAck, acks: []ackEntry{{1, 0, 5}, {9, 4096, 3000}}},
		{typ: tHello, aux: 3, data: make([]byte, 16)},
		{typ: tWelcome},
		{typ: tPing, id: 123, aux: 9},
		{typ: tPathDown, aux: 1},
		{typ: tClose},
		{typ: tError, data: []byte("no")},
		{typ: tProbe, data: make([]byte, 4096)},
	}
	var b []byte
	for _, f := range frames {
		b = appendFrame(b, f)
	}
	r := bytes.NewReader(b)
	for i, want := range frames {
		got, err := readFrame(r)
		if err != nil {
			t.Fatalf("frame %d (%s): %v", i, want.typ, err)
		}
		if got.typ != want.typ || got.label != want.label || got.flags != want.flags || got.id != want.id || got.off != want.off ||
			got.aux != want.aux || !bytes.Equal(got.data, want.data) || len(got.deps) != len(want.deps) || len(got.acks) != len(want.acks) {
			t.Errorf("frame %d: got %+v, want %+v", i, got, want)
		}
		for j := range want.deps {
			if got.deps[j] != want.deps[j] {
				t.Errorf("frame %d dep %d: %d, want %d", i, j, got.deps[j], want.deps[j])
			}
		}
		for j := range want.acks {
			if got.acks[j] != want.acks[j] {
				t.Errorf("frame %d ack %d: %+v, want %+v", i, j, got.acks[j], want.acks[j])
			}
		}
	}
}

// Frames a peer should never send are refused by name.
func TestFrameRefused(t *testing.T) {
	data := func(f *frame) []byte { return appendFrame(nil, f) }
	patch := func(b []byte, at int, v byte) []byte { b[at] = v; return b }
	tests := []struct {
		name string
		wire []byte
		want string
	}{
		{"version", patch(data(&frame{typ: tPing}), 0, 2), "version 2, want 1"},
		{"type", patch(data(&frame{typ: tPing}), 1, 77), "unknown frame type 77"},
		{"label", data(&frame{typ: tData, id: 1, label: 9}), "IROB 1: label(9) is not a label"},
		{"flags", data(&frame{typ: tData, id: 1, flags: 0x80}), "IROB 1: unknown flags 0x80"},
		{"id 0", data(&frame{typ: tData}), "IROB id 0"},
		{"dependency on a later IROB", data(&frame{typ: tData, id: 3, deps: []uint64{4}}), "IROB 3 depends on IROB 4: only on earlier ones"},
		{"dependency on itself", data(&frame{typ: tData, id: 3, deps: []uint64{3}}), "IROB 3 depends on IROB 3"},
		{"dependencies past the first chunk", data(&frame{typ: tData, id: 3, off: 10, deps: []uint64{1}}), "dependencies in a chunk at offset 10"},
		{"chunk too big", data(&frame{typ: tData, id: 3, data: make([]byte, MaxChunk+1)}), "at most 1048576 bytes of data"},
		{"ping with payload", data(&frame{typ: tPing, data: []byte("x")}), "ping frame with 1 bytes of payload"},
		{"short hello", data(&frame{typ: tHello, data: make([]byte, 4)}), "hello with a 4-byte session id, want 16"},
		{"long reason", data(&frame{typ: tError, data: make([]byte, maxText+1)}), "error reason of 1025 bytes"},
		{"probe too big", data(&frame{typ: tProbe, data: make([]byte, maxProbe+1)}), "probe of 262145 bytes, at most 262144"},
		{"cut header", data(&frame{typ: tPing})[:20], "stream ended inside a frame header"},
		{"cut payload", data(&frame{typ: tData, id: 1, data: []byte("abcdef")})[:35], "stream ended inside a data frame"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readFrame(bytes.NewReader(tt.wire))
			var pe *ProtocolError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("readFrame: %v, want a protocol error %q", err, tt.want)
			}
		})
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(appendFrame(nil, &frame{typ: tData, label: BGLarge, flags: flagEnd, id: 7, deps: []uint64{1}, data: []byte("x")}))
	f.Add(appendFrame(nil, &frame{typ: tAck, acks: []ackEntry{{1, 0, 5}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := readFrame(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What is read writes back the same.
		again := appendFrame(nil, fr)
		if !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("%x reads as %+v, which writes %x", b, fr, again)
		}
	})
}
