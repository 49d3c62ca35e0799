package netsched

import (
	"context"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// Where the kernel has fq_codel (most distribution kernels), every lane's
// leaf is fq_codel with CoDel's target, on the interface and on the IFB,
// and the enforcer picks it by itself. Skipped, and so reported by the
// kernel matrix, where the kernel lacks it.
func TestFqCodelLeaves(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireFeature(t, "qdisc fq_codel", func() error { return netprobe.HaveQdisc("fq_codel") })
	ns := newNetns(t, "lfq")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "ip", "-n", ns, "link", "set", "v-a", "up")
	before := tcState(t, ns, "v-a")
	e := newEnforcer(t, ns, nil)
	if e.Leaf() != LeafFqCodel {
		t.Fatalf("the kernel has fq_codel, the enforcer chose %s leaves", e.Leaf())
	}
	p := testPlan(t, "[net]\nrate = \"19mbit\"\ningress = true\n", "v-a", e.Leaf())
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	out := output(t, "tc", "-n", ns, "qdisc", "show")
	if n := strings.Count(out, "qdisc fq_codel"); n != 2*len(p.Classes) {
		t.Errorf("%d fq_codel leaves, want %d (one per lane on the interface and on the IFB):\n%s", n, 2*len(p.Classes), out)
	}
	if !strings.Contains(out, "target 5ms") {
		t.Errorf("fq_codel leaves without CoDel's 5 ms target:\n%s", out)
	}
	if err := e.Remove("v-a"); err != nil {
		t.Fatal(err)
	}
	if got := tcState(t, ns, "v-a"); got != before {
		t.Errorf("after Remove:\n%s\nwant:\n%s", got, before)
	}
}
