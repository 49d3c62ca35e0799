package bpf

import (
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestLoad loads every program through the kernel's verifier: it fails when
// a helper a program calls is not allowed in that program type here.
func TestLoad(t *testing.T) {
	testutil.RequireRoot(t)
	var objs LanesObjects
	if err := LoadLanesObjects(&objs, nil); err != nil {
		t.Fatalf("load lanes objects: %v", err)
	}
	defer objs.Close()
	for name, p := range map[string]any{
		"lanes_sock_create": objs.LanesSockCreate,
		"lanes_egress":      objs.LanesEgress,
		"lanes_ingress":     objs.LanesIngress,
	} {
		if p == nil {
			t.Errorf("program %s not loaded", name)
		}
	}
	for name, m := range map[string]any{
		"lane_flags":    objs.LaneFlags,
		"idle_slot":     objs.IdleSlot,
		"idle_gates":    objs.IdleGates,
		"idle_events":   objs.IdleEvents,
		"follow_of_dev": objs.FollowOfDev,
		"followed":      objs.Followed,
	} {
		if m == nil {
			t.Errorf("map %s not created", name)
		}
	}
}

// TestLoadSockmark loads the UDP marking programs, with lanes' lane_flags
// passed in as the kernel will get it from netsched.
func TestLoadSockmark(t *testing.T) {
	testutil.RequireRoot(t)
	var lanes LanesObjects
	if err := LoadLanesObjects(&lanes, nil); err != nil {
		t.Fatalf("load lanes objects: %v", err)
	}
	defer lanes.Close()
	var objs SockmarkObjects
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{"lane_flags": lanes.LaneFlags, "auto_label": lanes.AutoLabel}}
	if err := LoadSockmarkObjects(&objs, opts); err != nil {
		t.Fatalf("load sockmark objects: %v", err)
	}
	defer objs.Close()
	for name, p := range map[string]*ebpf.Program{
		"lanes_connect4": objs.LanesConnect4, "lanes_connect6": objs.LanesConnect6,
		"lanes_sendmsg4": objs.LanesSendmsg4, "lanes_sendmsg6": objs.LanesSendmsg6,
	} {
		if p == nil {
			t.Errorf("program %s not loaded", name)
		}
	}
}

// TestVerifierCost bounds the instructions the verifier walks for each
// classifier: every lanesd start and every tree pays them (the TCP
// option walk once cost about 200,000 each, a fifth of a second here and
// many seconds on an emulated CPU). The bound is a tenth of the kernel's
// limit of a million.
func TestVerifierCost(t *testing.T) {
	testutil.RequireRoot(t)
	var objs LanesObjects
	if err := LoadLanesObjects(&objs, nil); err != nil {
		t.Fatalf("load lanes objects: %v", err)
	}
	defer objs.Close()
	const bound = 100_000
	for name, p := range map[string]*ebpf.Program{
		"lanes_egress": objs.LanesEgress, "lanes_ingress": objs.LanesIngress,
		"lanes_sockops": objs.LanesSockops, "lanes_sock_create": objs.LanesSockCreate,
	} {
		info, err := p.Info()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n, ok := info.VerifiedInstructions()
		if !ok {
			t.Skipf("this kernel does not report verified instructions (5.16 and later do)")
		}
		t.Logf("%s: %d instructions verified", name, n)
		if n > bound {
			t.Errorf("%s: the verifier walked %d instructions, above %d", name, n, bound)
		}
	}
}
