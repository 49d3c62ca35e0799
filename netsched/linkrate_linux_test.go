package netsched

import (
	"context"
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestSetLinkRate moves the link's rate per direction as the auto rate's
// controller does, on a real tree with download shaping, and reads the
// kernel's classes and leaves back: the root class at the link rate, the
// lanes' classes (planned or tuned) scaled with it, FIFO limits following
// the ceilings, bad rates refused with nothing changed, the rates kept
// across Apply and put back by RestoreLinkRates.
func TestSetLinkRate(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lnl")
	run(t, "ip", "link", "add", "v-a", "netns", ns, "type", "veth", "peer", "name", "v-b", "netns", ns)
	run(t, "ip", "-n", ns, "link", "set", "v-a", "up")
	e := newEnforcer(t, ns, nil)
	p := testPlan(t, `[net]
rate = "50mbit"
ingress = true
[lanes.video]
net = { rate = "8mbit", ceil = "30mbit", borrow = true }
[lanes.fixed]
net = { rate = "4mbit" }
`, "v-a", e.Leaf())
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Cleanup(func() { e.Remove("v-a") })
	video, _ := p.Class("video")
	fixed, _ := p.Class("fixed")
	ifb := e.ifaces["v-a"].ifb
	root := Class{Lane: "(link)", ClassID: ClassID(Major, rootMinor)}
	type rc struct{ rate, ceil uint64 }
	type want struct {
		linkUp, linkDown rc
		videoUp, fixedUp rc
		videoDown        rc
	}
	steps := []struct {
		name    string
		do      func() error
		wantErr bool
		w       want
	}{
		{"planned", func() error { return nil }, false,
			want{rc{50e6, 50e6}, rc{50e6, 50e6}, rc{8e6, 30e6}, rc{4e6, 4e6}, rc{8e6, 30e6}}},
		{"upload at half", func() error { return e.SetLinkRate(false, 25e6) }, false,
			want{rc{25e6, 25e6}, rc{50e6, 50e6}, rc{4e6, 15e6}, rc{2e6, 2e6}, rc{8e6, 30e6}}},
		{"download at a fifth", func() error { return e.SetLinkRate(true, 10e6) }, false,
			want{rc{25e6, 25e6}, rc{10e6, 10e6}, rc{4e6, 15e6}, rc{2e6, 2e6}, rc{1.6e6, 6e6}}},
		{"above the configured rate", func() error { return e.SetLinkRate(false, 60e6) }, true,
			want{rc{25e6, 25e6}, rc{10e6, 10e6}, rc{4e6, 15e6}, rc{2e6, 2e6}, rc{1.6e6, 6e6}}},
		{"below the smallest rate", func() error { return e.SetLinkRate(true, 100) }, true,
			want{rc{25e6, 25e6}, rc{10e6, 10e6}, rc{4e6, 15e6}, rc{2e6, 2e6}, rc{1.6e6, 6e6}}},
		{"a lane tuned under a scaled link", func() error { return e.SetLaneRate("video", false, 20e6) }, false,
			want{rc{25e6, 25e6}, rc{10e6, 10e6}, rc{10e6, 15e6}, rc{2e6, 2e6}, rc{1.6e6, 6e6}}},
		{"re-apply keeps them", func() error { e.ifaces["v-a"].plan.Rate = 0; return e.Apply(context.Background(), p) }, false,
			want{rc{25e6, 25e6}, rc{10e6, 10e6}, rc{10e6, 15e6}, rc{2e6, 2e6}, rc{1.6e6, 6e6}}},
		{"restore the link", func() error { return e.RestoreLinkRates() }, false,
			want{rc{50e6, 50e6}, rc{50e6, 50e6}, rc{20e6, 30e6}, rc{4e6, 4e6}, rc{8e6, 30e6}}},
	}
	for _, s := range steps {
		err := s.do()
		if (err != nil) != s.wantErr {
			t.Fatalf("%s: error %v, want error %v", s.name, err, s.wantErr)
		}
		if got := e.LinkRate(false); got != s.w.linkUp.rate {
			t.Errorf("%s: LinkRate(upload) = %d, want %d", s.name, got, s.w.linkUp.rate)
		}
		if got := e.LinkRate(true); got != s.w.linkDown.rate {
			t.Errorf("%s: LinkRate(download) = %d, want %d", s.name, got, s.w.linkDown.rate)
		}
		for _, c := range []struct {
			what string
			dev  string
			cls  Class
			dl   bool
			w    rc
		}{
			{"link up", "v-a", root, false, s.w.linkUp},
			{"link down", ifb, root, true, s.w.linkDown},
			{"video up", "v-a", video, false, s.w.videoUp},
			{"fixed up", "v-a", fixed, false, s.w.fixedUp},
			{"video down", ifb, video, true, s.w.videoDown},
		} {
			r, ce := kernelRates(t, ns, c.dev, c.cls.ClassID)
			// HTB keeps rates in bytes/s: allow the rounding of a scaled rate.
			if diff(r, c.w.rate) > 8 || diff(ce, c.w.ceil) > 8 {
				t.Errorf("%s: %s class rate %d ceil %d, want %d %d", s.name, c.what, r, ce, c.w.rate, c.w.ceil)
			}
			if c.cls.Lane == root.Lane {
				continue
			}
			leaf := c.cls
			if c.dl {
				leaf = leaf.download()
			}
			if leaf.Leaf != LeafHeadDrop && leaf.Leaf != LeafBfifo {
				continue // fq_codel: its target is a time
			}
			leaf = leaf.withCeil(ce)
			if leaf.Leaf == LeafBfifo {
				leaf.Limit = max(leaf.Limit, ingressFloor(mustLink(t, ns, "v-a"), e.ifaces["v-a"]))
			}
			kind, limit := leafLimit(t, ns, c.dev, c.cls.ClassID)
			if kind != string(leaf.Leaf) || diff(uint64(limit), uint64(leaf.Limit)) > 1 {
				t.Errorf("%s: %s leaf %s limit %d, want %s limit %d (the target at ceil %d)", s.name, c.what, kind, limit, leaf.Leaf, leaf.Limit, ce)
			}
		}
	}
}

func diff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}
