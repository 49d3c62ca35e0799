package netsched

import (
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestMechanismsMatchProbes: what `lanes doctor` reports agrees with the
// probes.
func TestMechanismsMatchProbes(t *testing.T) {
	testutil.RequireRoot(t)
	e, err := New(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	wantLeaf := LeafHeadDrop
	if netprobe.HaveQdisc("fq_codel") == nil {
		wantLeaf = LeafFqCodel
	}
	ingressOK := netprobe.HaveIFB() == nil
	idleOK := netprobe.HaveQdisc("tbf") == nil
	ms := map[string]features.Mechanism{}
	for _, m := range e.Mechanisms() {
		ms[m.Resource] = m
		t.Logf("%s: %s (preferred %v, ok %v): %s", m.Resource, m.Backend, m.Preferred, m.OK, m.Reason)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"leaf matches the fq_codel probe", e.Leaf() == wantLeaf && ms["net scheduling"].Preferred == (wantLeaf == LeafFqCodel)},
		{"scheduling works", ms["net scheduling"].OK},
		{"classification works (BPF loaded here)", ms["net classification"].OK},
		{"ingress matches the ifb probe", ms["net ingress"].OK == ingressOK},
		{"background transport reported", ms["net background transport"].Backend != ""},
		{"idletime matches the tbf probe", ms["net idletime"].OK == idleOK && (!idleOK || ms["net idletime"].Backend == "tbf hold + daemon (BPF wake-up)")},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: %+v", tt.name, ms)
		}
	}
}

// `lanes doctor` without a daemon (netprobe.Probe, no lanes program
// loaded) reports the backends an Enforcer chooses on this kernel.
func TestDaemonlessProbeMatchesEnforcer(t *testing.T) {
	testutil.RequireRoot(t)
	e, err := New(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := map[string]features.Mechanism{}
	for _, m := range netprobe.Probe().Mechanisms() {
		got[m.Resource] = m
	}
	for _, want := range e.Mechanisms() {
		if strings.HasPrefix(want.Resource, "net link ") || strings.HasPrefix(want.Resource, "net root qdisc ") {
			continue // the interfaces lanes shapes: lanesd's alone
		}
		g, ok := got[want.Resource]
		switch {
		case !ok:
			t.Errorf("%s: missing from the daemon-less probe", want.Resource)
		case g.Backend != want.Backend || g.OK != want.OK || g.Preferred != want.Preferred:
			t.Errorf("%s: daemon-less probe says %q (ok %v, preferred %v), the enforcer %q (ok %v, preferred %v)",
				want.Resource, g.Backend, g.OK, g.Preferred, want.Backend, want.OK, want.Preferred)
		}
		delete(got, want.Resource)
	}
	for r := range got {
		t.Errorf("%s: reported by the daemon-less probe only", r)
	}
}
