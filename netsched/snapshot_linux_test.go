package netsched

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// rootTrees are root qdisc trees an interface may have before lanes: each
// must come back exactly as found.
var rootTrees = []struct {
	name string
	tc   [][]string // tc arguments after "tc -n NS", on device v-a
}{
	{"bfifo limit 3000", [][]string{{"qdisc", "add", "dev", "v-a", "root", "bfifo", "limit", "3000"}}},
	{"pfifo limit 77", [][]string{{"qdisc", "add", "dev", "v-a", "root", "handle", "5:", "pfifo", "limit", "77"}}},
	{"pfifo_head_drop", [][]string{{"qdisc", "add", "dev", "v-a", "root", "pfifo_head_drop", "limit", "33"}}},
	{"tbf", [][]string{{"qdisc", "add", "dev", "v-a", "root", "handle", "9:", "tbf", "rate", "7mbit", "burst", "12kb", "latency", "40ms", "mtu", "2000"}}},
	{"htb with classes, leaves and a u32 filter", [][]string{
		{"qdisc", "add", "dev", "v-a", "root", "handle", "1:", "htb", "default", "3", "r2q", "7"},
		{"class", "add", "dev", "v-a", "parent", "1:", "classid", "1:1", "htb", "rate", "10mbit", "ceil", "20mbit", "prio", "1"},
		{"class", "add", "dev", "v-a", "parent", "1:", "classid", "1:3", "htb", "rate", "2mbit", "ceil", "5mbit", "prio", "4"},
		{"qdisc", "add", "dev", "v-a", "parent", "1:1", "handle", "10:", "pfifo", "limit", "55"},
		{"qdisc", "add", "dev", "v-a", "parent", "1:3", "handle", "30:", "bfifo", "limit", "40000"},
		{"filter", "add", "dev", "v-a", "parent", "1:", "protocol", "ip", "prio", "5", "u32", "match", "ip", "dport", "22", "0xffff", "flowid", "1:1"},
	}},
}

// newRootTree makes a namespace with veth v-a carrying tree, and returns
// the namespace and what tc shows of v-a.
func newRootTree(t *testing.T, tree [][]string) (ns, before string) {
	t.Helper()
	ns = newNetns(t, "lnt")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "ip", "-n", ns, "link", "set", "v-a", "up")
	for _, args := range tree {
		run(t, append([]string{"tc", "-n", ns}, args...)...)
	}
	return ns, tcState(t, ns, "v-a")
}

// TestRootTreeRestored: each tree comes back as found after Apply and
// Remove, and after a crash (the enforcer gone without Remove), Cleanup
// and RestoreTree with the snapshot as the daemon records it (JSON).
func TestRootTreeRestored(t *testing.T) {
	testutil.RequireRoot(t)
	toml := "[net]\nrate = \"10mbit\"\ningress = true\n"
	for _, tt := range rootTrees {
		t.Run(tt.name, func(t *testing.T) {
			ns, before := newRootTree(t, tt.tc)
			t.Logf("before:\n%s", before)
			e := newEnforcer(t, ns, nil)
			p := testPlan(t, toml, "v-a", e.Leaf())
			if err := e.Apply(context.Background(), p); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if s := tcState(t, ns, "v-a"); !strings.Contains(s, "qdisc htb 4c4e: root") {
				t.Fatalf("not shaped:\n%s", s)
			}
			if _, ok := e.OriginalTree("v-a"); !ok {
				t.Error("OriginalTree: none")
			}
			if err := e.Remove("v-a"); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			if after := tcState(t, ns, "v-a"); after != before {
				t.Errorf("after Remove:\n%s\nwant:\n%s", after, before)
			}

			// The crash: Apply, keep the record, lose the enforcer.
			crashed, err := New(t.Logf, WithNetns(nsPath(ns)))
			if err != nil {
				t.Fatal(err)
			}
			if err := crashed.Apply(context.Background(), p); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			snap, ok := crashed.OriginalTree("v-a")
			if !ok {
				t.Fatal("OriginalTree: none")
			}
			rec, err := json.Marshal(snap)
			if err != nil {
				t.Fatal(err)
			}
			crashed.Close()
			var back TreeSnapshot
			if err := json.Unmarshal(rec, &back); err != nil {
				t.Fatal(err)
			}
			if err := Cleanup(t.Logf, WithNetns(nsPath(ns))); err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if err := RestoreTree(t.Logf, "v-a", &back, WithNetns(nsPath(ns))); err != nil {
				t.Fatalf("RestoreTree: %v", err)
			}
			if after := tcState(t, ns, "v-a"); after != before {
				t.Errorf("after crash, Cleanup and RestoreTree:\n%s\nwant:\n%s", after, before)
			}
		})
	}
}

// TestRootTreeNotRestorable: a size table for ATM cells cannot be created
// from its dump (the kernel dumps the table's parameters, not the table),
// so lanes keeps such a root and says why, unless the plan has
// ReplaceRoot.
func TestRootTreeNotRestorable(t *testing.T) {
	testutil.RequireRoot(t)
	ns, before := newRootTree(t, [][]string{{"qdisc", "add", "dev", "v-a", "root", "handle", "2:", "stab",
		"linklayer", "atm", "overhead", "10", "bfifo", "limit", "3000"}})
	e := newEnforcer(t, ns, nil)
	p := testPlan(t, "[net]\nrate = \"10mbit\"\n", "v-a", e.Leaf())
	err := e.Apply(context.Background(), p)
	if !errors.Is(err, ErrRootNotRestorable) {
		t.Fatalf("Apply = %v, want ErrRootNotRestorable", err)
	}
	t.Logf("refused: %v", err)
	if !strings.Contains(err.Error(), "replace_root") {
		t.Errorf("error does not name the setting: %v", err)
	}
	if after := tcState(t, ns, "v-a"); after != before {
		t.Errorf("refused Apply changed v-a:\n%s\nwant:\n%s", after, before)
	}
	found := false
	for _, m := range e.Mechanisms() {
		if m.Resource == "net root qdisc v-a" && !m.OK && strings.Contains(m.Reason, "replace_root") {
			found = true
		}
	}
	if !found {
		t.Errorf("no doctor line for the kept root: %+v", e.Mechanisms())
	}

	p.ReplaceRoot = true
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply with ReplaceRoot: %v", err)
	}
	if s := tcState(t, ns, "v-a"); !strings.Contains(s, "qdisc htb 4c4e: root") {
		t.Fatalf("not shaped with ReplaceRoot:\n%s", s)
	}
	for _, m := range e.Mechanisms() {
		if m.Resource == "net root qdisc v-a" && !m.OK {
			t.Errorf("still refused after shaping: %+v", m)
		}
	}
	if err := e.Remove("v-a"); err != nil {
		t.Logf("Remove (best effort restore): %v", err)
	}
}
