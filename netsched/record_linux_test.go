package netsched

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/state"
)

// TestRecords: with a store, Apply records the interface (its original
// root tree and segment sizes) and Remove deletes the record; after a
// crash (the enforcer closed without Remove) CleanupRecorded gives the
// interface back as found, root tree and sizes, and deletes the record.
func TestRecords(t *testing.T) {
	testutil.RequireRoot(t)
	ns, before := newRootTree(t, rootTrees[1].tc) // pfifo limit 77
	h, err := netlink.NewHandleAt(mustNs(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sizes := func() SegmentSizes {
		t.Helper()
		l, err := h.LinkByName("v-a")
		if err != nil {
			t.Fatal(err)
		}
		return sizesOf(l)
	}
	origSizes := sizes()
	store, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	records := func() []ifaceRecord {
		t.Helper()
		recs, err := store.List(state.KindQdisc)
		if err != nil {
			t.Fatal(err)
		}
		var out []ifaceRecord
		for _, r := range recs {
			var rec ifaceRecord
			if err := json.Unmarshal(r.Data, &rec); err != nil {
				t.Fatalf("record %s: %v", r.Key, err)
			}
			out = append(out, rec)
		}
		return out
	}
	const toml = "[net]\nrate = \"19mbit\"\ningress = true\n"
	apply := func() *Enforcer {
		t.Helper()
		e, err := New(t.Logf, WithNetns(nsPath(ns)), WithStore(store))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Apply(context.Background(), testPlan(t, toml, "v-a", e.Leaf())); err != nil {
			e.Close()
			t.Fatalf("Apply: %v", err)
		}
		recs := records()
		if len(recs) != 1 || recs[0].Iface != "v-a" || recs[0].Rate != 19_000_000 || recs[0].Tree == nil || recs[0].Sizes == nil || *recs[0].Sizes != origSizes {
			t.Errorf("records after Apply: %+v, want v-a at 19mbit with its tree and sizes %+v", recs, origSizes)
		}
		return e
	}

	// A clean stop.
	e := apply()
	if err := e.Remove("v-a"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	e.Close()
	if recs := records(); len(recs) != 0 {
		t.Errorf("records after Remove: %+v", recs)
	}

	// A crash: the enforcer goes without Remove; the next start cleans up.
	e = apply()
	if sizes() == origSizes {
		t.Logf("segment sizes not bounded here (%+v): only the tree is checked", origSizes)
	}
	e.Close()
	CleanupRecorded(t.Logf, store, WithNetns(nsPath(ns)))
	if after := tcState(t, ns, "v-a"); after != before {
		t.Errorf("after CleanupRecorded:\n%s\nwant:\n%s", after, before)
	}
	if got := sizes(); got != origSizes {
		t.Errorf("segment sizes after CleanupRecorded %+v, want %+v", got, origSizes)
	}
	if recs := records(); len(recs) != 0 {
		t.Errorf("records after CleanupRecorded: %+v", recs)
	}
}
