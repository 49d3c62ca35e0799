package bpf

import (
	"testing"

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
