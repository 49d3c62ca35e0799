package bpf

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// synAck builds an Ethernet, IPv4 and TCP SYN-ACK frame whose TCP header
// carries opts (padded with zero bytes, TCP's end of options, to a
// multiple of four). doff overrides the header length in words when not
// zero, to claim options the frame does not have.
func synAck(opts []byte, doff int) []byte {
	for len(opts)%4 != 0 {
		opts = append(opts, 0)
	}
	f := make([]byte, 14+20+20+len(opts))
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+len(opts)))
	ip[8] = 64
	ip[9] = 6 // TCP
	copy(ip[12:], []byte{198, 18, 0, 1})
	copy(ip[16:], []byte{198, 18, 0, 2})
	th := ip[20:]
	binary.BigEndian.PutUint16(th[0:], 5201)
	binary.BigEndian.PutUint16(th[2:], 40000)
	if doff == 0 {
		doff = (20 + len(opts)) / 4
	}
	th[12] = byte(doff << 4)
	th[13] = 0x12 // SYN, ACK
	binary.BigEndian.PutUint16(th[14:], 65535)
	copy(th[20:], opts)
	return f
}

func nops(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 1
	}
	return b
}

// TestWindowScaleOption runs lanes_egress on SYN-ACKs with every layout
// of TCP options the parser must handle and checks the window scale it
// records for the connection (0 when the SYN-ACK offers none or the
// options are malformed). It is the verifier-friendly walk of issue 13's
// receive-window bound: a global function that forgets how it reached
// an offset.
func TestWindowScaleOption(t *testing.T) {
	testutil.RequireRoot(t)
	var objs LanesObjects
	if err := LoadLanesObjects(&objs, nil); err != nil {
		t.Fatalf("load lanes objects: %v", err)
	}
	defer objs.Close()
	// A receive limit for the default class of the loopback device, on
	// which the kernel runs test packets: rx_egress parses SYN-ACKs
	// leaving a device that has one.
	if err := objs.RxWindow.Put(LanesRxKey{Ifindex: 1}, LanesRxLimit{CeilBps: 1e6, Gain: 1024}); err != nil {
		t.Fatal(err)
	}
	ws7 := []byte{3, 3, 7}
	mss := []byte{2, 4, 0x05, 0xb4}
	sackOK := []byte{4, 2}
	ts := []byte{8, 10, 0, 0, 0, 1, 0, 0, 0, 0}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	tests := []struct {
		name string
		opts []byte
		doff int
		want uint8
	}{
		{"linux layout: mss, sack ok, timestamps, nop, scale", cat(mss, sackOK, ts, nops(1), ws7), 0, 7},
		{"scale first", ws7, 0, 7},
		{"17 nops then scale", cat(nops(17), ws7), 0, 7},
		{"37 nops then scale: the last three of 40 bytes", cat(nops(37), ws7), 0, 7},
		{"scale after every other kind", cat(mss, nops(2), sackOK, ts, []byte{30, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ws7), 0, 7},
		{"no options", nil, 0, 0},
		{"options without a scale", cat(mss, sackOK, ts), 0, 0},
		{"end of options before the scale", cat(mss, []byte{0}, nops(3), ws7), 0, 0},
		{"length below 2 before the scale", cat([]byte{5, 1}, ws7), 0, 0},
		{"length past the options", cat([]byte{5, 30}, ws7), 0, 0},
		{"scale option of length 4", []byte{3, 4, 7, 0}, 0, 0},
		{"scale above 14 counts as 14", []byte{3, 3, 20}, 0, 14},
		{"scale cut off by the end of the frame", cat(nops(4), ws7), 15, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var k []byte
			for it := objs.RxSynack.Iterate(); it.Next(&k, new(uint8)); {
				_ = objs.RxSynack.Delete(k)
			}
			frame := synAck(tt.opts, tt.doff)
			if tt.doff != 0 {
				// The header claims 40 bytes of options; the frame ends
				// inside the last option.
				frame = frame[:14+20+20+len(tt.opts)-1]
			}
			ret, err := objs.LanesEgress.Run(&ebpf.RunOptions{Data: frame})
			if err != nil {
				t.Fatalf("run lanes_egress: %v", err)
			}
			if ret != 0 { // TC_ACT_OK
				t.Fatalf("lanes_egress returned %d, want TC_ACT_OK", ret)
			}
			var (
				key []byte
				got uint8
				n   int
			)
			for it := objs.RxSynack.Iterate(); it.Next(&key, &got); {
				n++
			}
			if n != 1 {
				t.Fatalf("%d SYN-ACK records, want 1", n)
			}
			if got != tt.want {
				t.Errorf("window scale %d, want %d", got, tt.want)
			}
		})
	}
}
