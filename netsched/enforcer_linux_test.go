package netsched

import (
	"context"
	"errors"
	"github.com/lanes-qos/lanes/internal/netprobe"
	"strings"
	"sync"
	"testing"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

// opLog records the kernel operations an Enforcer logs.
type opLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *opLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, strings.TrimPrefix(sprintf(format, args...), "netsched: "))
}

func (l *opLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}

func newEnforcer(t *testing.T, ns string, log *opLog) *Enforcer {
	t.Helper()
	logf := t.Logf
	if log != nil {
		logf = log.logf
	}
	e, err := New(logf, WithNetns(nsPath(ns)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// testPlan is toml's tree on iface without its idletime part (the
// enforcer tests' plans; the idletime tests add theirs with withIdletime).
func testPlan(t *testing.T, toml, iface string, leaf LeafKind) Plan {
	t.Helper()
	p, err := buildTree(mustParse(t, toml), iface, leaf)
	if err != nil {
		t.Fatalf("buildTree: %v", err)
	}
	return p
}

// tcState is what tc shows on the device: qdiscs, classes, filters.
func tcState(t *testing.T, ns, dev string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(output(t, "tc", "-n", ns, "qdisc", "show", "dev", dev))
	b.WriteString(output(t, "tc", "-n", ns, "class", "show", "dev", dev))
	for _, dir := range []string{"ingress", "egress"} {
		out, _ := execOutput("tc", "-n", ns, "filter", "show", "dev", dev, dir)
		b.WriteString(out)
	}
	links, _ := execOutput("ip", "-n", ns, "-o", "link", "show", "type", "ifb")
	b.WriteString(links)
	return b.String()
}

func TestApplyIdempotentAndRemove(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lna")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "ip", "-n", ns, "link", "set", "v-a", "up")
	before := tcState(t, ns, "v-a")

	log := &opLog{}
	e := newEnforcer(t, ns, log)
	p := testPlan(t, "[net]\nrate = \"19mbit\"\ningress = true\n[lanes.video]\nnet = { priority = 1, rate = \"8mbit\" }\n", "v-a", e.Leaf())
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	first := log.take()
	if len(first) == 0 {
		t.Fatal("first Apply logged no operations")
	}
	applied := tcState(t, ns, "v-a")
	for _, want := range []string{"qdisc htb 4c4e: root", "class htb 4c4e:10", "class htb 4c4e:11", "class htb 4c4e:12", "class htb 4c4e:20", "lanes_egress", "lanes_ingress", "lanes-ifb"} {
		if !strings.Contains(applied, want) {
			t.Errorf("after Apply, tc lacks %q:\n%s", want, applied)
		}
	}
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if ops := log.take(); len(ops) != 0 {
		t.Errorf("second Apply with the same plan issued operations: %q", ops)
	}
	if again := tcState(t, ns, "v-a"); again != applied {
		t.Errorf("second Apply changed the tree:\n%s\nwas:\n%s", again, applied)
	}

	// A changed plan: the user lane goes away, its class with it.
	p2 := testPlan(t, "[net]\nrate = \"19mbit\"\ningress = true\n", "v-a", e.Leaf())
	if err := e.Apply(context.Background(), p2); err != nil {
		t.Fatalf("Apply changed plan: %v", err)
	}
	if s := tcState(t, ns, "v-a"); strings.Contains(s, "4c4e:20") {
		t.Errorf("stale class 4c4e:20 left after plan change:\n%s", s)
	}
	if err := e.Remove("v-a"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if after := tcState(t, ns, "v-a"); after != before {
		t.Errorf("Remove did not restore the interface:\n%s\nwant:\n%s", after, before)
	}
}

// TestApplyRestoresOriginalRoot: a root qdisc set up before lanes comes
// back on Remove.
func TestApplyRestoresOriginalRoot(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lno")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "tc", "-n", ns, "qdisc", "add", "dev", "v-a", "root", "handle", "7:", "htb", "default", "3")
	before := output(t, "tc", "-n", ns, "qdisc", "show", "dev", "v-a")
	e := newEnforcer(t, ns, nil)
	if err := e.Apply(context.Background(), testPlan(t, "[net]\nrate = \"10mbit\"\n", "v-a", e.Leaf())); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := e.Remove("v-a"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if after := output(t, "tc", "-n", ns, "qdisc", "show", "dev", "v-a"); after != before {
		t.Errorf("original root not restored: %q, want %q", after, before)
	}
}

// TestApplyBadInput: each bad input gives a clear error and leaves the
// interface as it was.
func TestApplyBadInput(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lnb")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "ip", "-n", ns, "link", "set", "v-a", "up")
	before := tcState(t, ns, "v-a")
	e := newEnforcer(t, ns, nil)

	good := testPlan(t, "[net]\nrate = \"19mbit\"\ningress = true\n", "v-a", LeafHeadDrop)
	missing := good
	missing.Iface = "nosuchdev0"
	zero := good
	zero.Rate = 0
	tests := []struct {
		name    string
		plan    Plan
		wantErr string
		is      error
	}{
		{"missing interface", missing, "interface nosuchdev0", nil},
		{"zero rate", zero, "zero rate", ErrBadPlan},
	}
	if netprobe.HaveQdisc("fq_codel") != nil {
		// The kernel lacks fq_codel: Apply fails after the HTB root and
		// the first class exist, and must undo them.
		lacking := testPlan(t, "[net]\nrate = \"19mbit\"\ningress = true\n", "v-a", LeafFqCodel)
		tests = append(tests, struct {
			name    string
			plan    Plan
			wantErr string
			is      error
		}{"leaf qdisc the kernel lacks", lacking, "fq_codel", features.ErrNotSupported})
	} else {
		t.Log("this kernel has fq_codel: the missing-qdisc case needs a kernel without it")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.Apply(context.Background(), tt.plan)
			if err == nil {
				t.Fatal("Apply succeeded")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
			if after := tcState(t, ns, "v-a"); after != before {
				t.Errorf("partial tree left:\n%s\nwant:\n%s", after, before)
			}
		})
	}
	// BuildPlan rejects the same inputs before anything is applied.
	if _, err := BuildPlan(lane.Default(), "v-a", Caps{Leaf: LeafHeadDrop}); !errors.Is(err, ErrBadPlan) {
		t.Errorf("BuildPlan without net.rate = %v, want ErrBadPlan", err)
	}
}

// TestCleanupAfterCrash: a tree whose enforcer vanished (closed without
// Remove, as after a crash) is removed by Cleanup.
func TestCleanupAfterCrash(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lnc")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "ip", "-n", ns, "link", "set", "v-a", "up")
	before := tcState(t, ns, "v-a")
	e, err := New(t.Logf, WithNetns(nsPath(ns)))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(context.Background(), testPlan(t, "[net]\nrate = \"19mbit\"\ningress = true\n", "v-a", e.Leaf())); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	e.Close()
	if s := tcState(t, ns, "v-a"); !strings.Contains(s, "4c4e:") {
		t.Fatalf("tree gone before Cleanup:\n%s", s)
	}
	if err := Cleanup(t.Logf, WithNetns(nsPath(ns))); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if after := tcState(t, ns, "v-a"); after != before {
		t.Errorf("Cleanup left:\n%s\nwant:\n%s", after, before)
	}
}

// TestAdoptAfterCrash: a new Enforcer (a restarted daemon) applies the
// same plan over a tree a crashed one left: the tree is adopted, the
// filters run the new programs, and Remove still restores the interface.
func TestAdoptAfterCrash(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lnd")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "ip", "-n", ns, "link", "set", "v-a", "up")
	before := tcState(t, ns, "v-a")
	toml := "[net]\nrate = \"19mbit\"\ningress = true\n"
	crashed, err := New(t.Logf, WithNetns(nsPath(ns)))
	if err != nil {
		t.Fatal(err)
	}
	if err := crashed.Apply(context.Background(), testPlan(t, toml, "v-a", crashed.Leaf())); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	crashed.Close()
	left := tcState(t, ns, "v-a")

	e := newEnforcer(t, ns, nil)
	if err := e.Apply(context.Background(), testPlan(t, toml, "v-a", e.Leaf())); err != nil {
		t.Fatalf("Apply over the leftover tree: %v", err)
	}
	adopted := tcState(t, ns, "v-a")
	if strings.Count(adopted, "handle 0x1 lanes_egress") != 1 || strings.Count(adopted, "handle 0x1 lanes_ingress") != 1 ||
		strings.Count(adopted, "mirred") != 1 || strings.Count(adopted, "lanes-ifb") != strings.Count(left, "lanes-ifb") {
		t.Errorf("adoption duplicated lanes' objects:\n%s\nleft by the crash:\n%s", adopted, left)
	}
	if err := e.Remove("v-a"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if after := tcState(t, ns, "v-a"); after != before {
		t.Errorf("Remove after adoption left:\n%s\nwant:\n%s", after, before)
	}
}
