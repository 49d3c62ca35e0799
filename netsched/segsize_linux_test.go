package netsched

import (
	"context"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/lanes-qos/lanes/internal/testutil"
)

func TestSegmentCap(t *testing.T) {
	tests := []struct {
		rate uint64
		want uint32
	}{
		{1_000_000, minSegment},      // 125 bytes a millisecond: two packets
		{19_000_000, minSegment},     // 2,375 bytes
		{100_000_000, 12_500},        // a millisecond
		{1_000_000_000, superPacket}, // never above 64 KiB
	}
	for _, tt := range tests {
		if got := segmentCap(tt.rate); got != tt.want {
			t.Errorf("segmentCap(%d) = %d, want %d", tt.rate, got, tt.want)
		}
	}
}

func TestSegmentSizesBounded(t *testing.T) {
	full := SegmentSizes{GSO: 65536, GSOIPv4: 65536, GRO: 65536, GROIPv4: 65536}
	tests := []struct {
		name    string
		s       SegmentSizes
		ingress bool
		want    SegmentSizes
	}{
		{"upload only: GRO kept", full, false, SegmentSizes{GSO: 3028, GSOIPv4: 3028, GRO: 65536, GROIPv4: 65536}},
		{"with ingress: GRO too", full, true, SegmentSizes{GSO: 3028, GSOIPv4: 3028, GRO: 3028, GROIPv4: 3028}},
		{"a lower limit stays", SegmentSizes{GSO: 2000, GRO: 65536}, true, SegmentSizes{GSO: 2000, GRO: 3028}},
		{"unreported limits stay unreported", SegmentSizes{GSO: 65536}, true, SegmentSizes{GSO: 3028}},
	}
	for _, tt := range tests {
		if got := tt.s.bounded(3028, tt.ingress); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestApplyBoundsSegments: while lanes shapes a device at 19 Mbit/s its
// GSO and GRO sizes are two packets; Remove gives the originals back, and
// RestoreSizes does what a run after a crash needs.
func TestApplyBoundsSegments(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lng")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "ip", "-n", ns, "link", "set", "v-a", "up")
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
	before := sizes()
	if before.GSO < superPacket {
		t.Skipf("veth's gso_max_size is %d here, not the 64 KiB default", before.GSO)
	}
	e := newEnforcer(t, ns, nil)
	if err := e.Apply(context.Background(), testPlan(t, "[net]\nrate = \"19mbit\"\ningress = true\n", "v-a", e.Leaf())); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	got := sizes()
	want := before.bounded(minSegment, true)
	if got != want {
		t.Errorf("while shaped: sizes %+v, want %+v", got, want)
	}
	if orig, ok := e.OriginalSizes("v-a"); !ok || orig != before {
		t.Errorf("OriginalSizes = %+v, %v; want %+v", orig, ok, before)
	}
	if err := e.Remove("v-a"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if got := sizes(); got != before {
		t.Errorf("after Remove: sizes %+v, want the originals %+v", got, before)
	}

	// A crashed run: the sizes stay bounded until a later run restores
	// what the records say.
	e2 := newEnforcer(t, ns, nil)
	if err := e2.Apply(context.Background(), testPlan(t, "[net]\nrate = \"19mbit\"\n", "v-a", e2.Leaf())); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := Cleanup(t.Logf, WithNetns(nsPath(ns))); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if err := RestoreSizes(t.Logf, "v-a", before, WithNetns(nsPath(ns))); err != nil {
		t.Fatalf("RestoreSizes: %v", err)
	}
	if got := sizes(); got != before {
		t.Errorf("after RestoreSizes: sizes %+v, want %+v", got, before)
	}
}

// mustNs opens the named network namespace for the rest of the test.
func mustNs(t *testing.T, name string) netns.NsHandle {
	t.Helper()
	h, err := netns.GetFromPath(nsPath(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}
