package bpf

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// skbHead is struct __sk_buff's start up to priority, zero-padded past
// the struct's end (the kernel takes a longer context whose tail is zero,
// and gives back no shorter one): the context a test run takes and gives
// back.
type skbHead struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto, Priority uint32
	_                                                                                     [119]uint32
}

// echoFrame builds an Ethernet frame with an ICMP (v6: ICMPv6) message of
// type typ and identifier id (echo and timestamp messages keep it in the
// same place); icmpLen cuts the ICMP part short.
func echoFrame(v6 bool, typ uint8, id uint16, icmpLen int) []byte {
	var f []byte
	if v6 {
		f = make([]byte, 14+40+icmpLen)
		binary.BigEndian.PutUint16(f[12:], 0x86dd)
		ip := f[14:]
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(icmpLen))
		ip[6] = 58
		ip[7] = 64
		copy(ip[8:], []byte{0x20, 0x01, 0, 2, 15: 2})
		copy(ip[24:], []byte{0x20, 0x01, 0, 2, 15: 1})
		f = append(f[:14+40], make([]byte, icmpLen)...)
	} else {
		f = make([]byte, 14+20+icmpLen)
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := f[14:]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+icmpLen))
		ip[8] = 64
		ip[9] = 1
		copy(ip[12:], []byte{198, 18, 0, 2})
		copy(ip[16:], []byte{198, 18, 0, 1})
	}
	ic := f[len(f)-icmpLen:]
	if icmpLen >= 8 {
		ic[0] = typ
		binary.BigEndian.PutUint16(ic[4:], id)
		binary.BigEndian.PutUint16(ic[6:], 1)
	}
	return f
}

// TestProbeClass runs lanes_ingress on ICMP messages: only echo and
// timestamp replies whose identifier is in probe_class (the auto rate's pinger) get its
// class as their priority, so the download tree serves them in it.
func TestProbeClass(t *testing.T) {
	testutil.RequireRoot(t)
	var objs LanesObjects
	if err := LoadLanesObjects(&objs, nil); err != nil {
		t.Fatalf("load lanes objects: %v", err)
	}
	defer objs.Close()
	const id, class = 0x4c4e, 0x4c4e0010
	key := binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, id))
	if err := objs.ProbeClass.Put(key, uint32(class)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		frame []byte
		want  uint32
	}{
		{"echo reply to the probe", echoFrame(false, 0, id, 64), class},
		{"ICMPv6 echo reply to the probe", echoFrame(true, 129, id, 64), class},
		{"timestamp reply to the probe", echoFrame(false, 14, id, 20), class},
		{"timestamp request with the probe's identifier", echoFrame(false, 13, id, 20), 0},
		{"ICMPv6 type 14 is not a reply", echoFrame(true, 14, id, 20), 0},
		{"echo reply, another identifier", echoFrame(false, 0, id+1, 64), 0},
		{"echo request with the probe's identifier", echoFrame(false, 8, id, 64), 0},
		{"ICMPv6 type 0 is not a reply", echoFrame(true, 0, id, 64), 0},
		{"ICMP header cut short", echoFrame(false, 0, id, 6), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out skbHead
			ret, err := objs.LanesIngress.Run(&ebpf.RunOptions{Data: tt.frame, Context: skbHead{}, ContextOut: &out})
			if err != nil {
				t.Fatalf("run lanes_ingress: %v", err)
			}
			if ret != ^uint32(0) { // TC_ACT_UNSPEC
				t.Fatalf("lanes_ingress returned %d, want TC_ACT_UNSPEC", int32(ret))
			}
			if out.Priority != tt.want {
				t.Errorf("priority %#x, want %#x", out.Priority, tt.want)
			}
		})
	}
}
