package netsched

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// kernelRates reads the lane class's rate and ceiling (bits/s) from the
// kernel on dev in ns.
func kernelRates(t *testing.T, ns, dev string, classid uint32) (uint64, uint64) {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	link, err := nh.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	classes, err := nh.ClassList(link, ClassID(Major, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		if hc, ok := c.(*netlink.HtbClass); ok && hc.Handle == classid {
			return hc.Rate * 8, hc.Ceil * 8 // the kernel keeps bytes/s
		}
	}
	t.Fatalf("no class %x on %s", classid, dev)
	return 0, 0
}

// leafLimit reads the limit of the leaf qdisc under classid on dev in ns
// (packets or bytes, as its kind counts).
func leafLimit(t *testing.T, ns, dev string, classid uint32) (string, uint32) {
	t.Helper()
	var qs []struct {
		Kind    string `json:"kind"`
		Parent  string `json:"parent"`
		Options struct {
			Limit uint32 `json:"limit"`
		} `json:"options"`
	}
	out := output(t, "tc", "-n", ns, "-j", "qdisc", "show", "dev", dev)
	if err := json.Unmarshal([]byte(out), &qs); err != nil {
		t.Fatalf("tc -j qdisc show: %v\n%s", err, out)
	}
	parent := fmt.Sprintf("%x:%x", classid>>16, classid&0xffff)
	for _, q := range qs {
		if q.Parent == parent {
			return q.Kind, q.Options.Limit
		}
	}
	t.Fatalf("no leaf under %s on %s:\n%s", parent, dev, out)
	return "", 0
}

// A lane's HTB class changes in place at run time, upload and download,
// within the link; a rate above a borrowing class's ceiling and a ceiling
// below its rate are refused and change nothing; a class that may not
// borrow keeps ceil = rate; a re-Apply keeps the change; RestoreLane puts
// the plan back. A FIFO leaf's limit follows the ceiling (the lane's
// target at it), as the plan sizes it for the configured one.
func TestTuneClass(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNetns(t, "lnt")
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
	type want struct{ rate, ceil uint64 }
	steps := []struct {
		name    string
		do      func() error
		wantErr bool
		up      want // video upload
		down    want // video download
		fixed   want // fixed upload
	}{
		{"planned", func() error { return nil }, false, want{8e6, 30e6}, want{8e6, 30e6}, want{4e6, 4e6}},
		{"video up rate", func() error { return e.SetLaneRate("video", false, 20e6) }, false, want{20e6, 30e6}, want{8e6, 30e6}, want{4e6, 4e6}},
		{"video down ceil", func() error { return e.SetLaneCeil("video", true, 45e6) }, false, want{20e6, 30e6}, want{8e6, 45e6}, want{4e6, 4e6}},
		{"rate above ceiling", func() error { return e.SetLaneRate("video", false, 35e6) }, true, want{20e6, 30e6}, want{8e6, 45e6}, want{4e6, 4e6}},
		{"ceil below rate", func() error { return e.SetLaneCeil("video", false, 10e6) }, true, want{20e6, 30e6}, want{8e6, 45e6}, want{4e6, 4e6}},
		{"ceil above link", func() error { return e.SetLaneCeil("video", false, 60e6) }, true, want{20e6, 30e6}, want{8e6, 45e6}, want{4e6, 4e6}},
		{"rate below minimum", func() error { return e.SetLaneRate("video", false, 100) }, true, want{20e6, 30e6}, want{8e6, 45e6}, want{4e6, 4e6}},
		{"unknown lane", func() error { return e.SetLaneRate("nope", false, 10e6) }, true, want{20e6, 30e6}, want{8e6, 45e6}, want{4e6, 4e6}},
		{"fixed ceil follows rate", func() error { return e.SetLaneRate("fixed", false, 6e6) }, false, want{20e6, 30e6}, want{8e6, 45e6}, want{6e6, 6e6}},
		{"re-apply keeps them", func() error { e.ifaces["v-a"].plan.Rate = 0; return e.Apply(context.Background(), p) }, false, want{20e6, 30e6}, want{8e6, 45e6}, want{6e6, 6e6}},
		{"restore video", func() error { return e.RestoreLane("video") }, false, want{8e6, 30e6}, want{8e6, 30e6}, want{6e6, 6e6}},
		{"restore fixed", func() error { return e.RestoreLane("fixed") }, false, want{8e6, 30e6}, want{8e6, 30e6}, want{4e6, 4e6}},
	}
	for _, s := range steps {
		err := s.do()
		if (err != nil) != s.wantErr {
			t.Fatalf("%s: error %v, want error %v", s.name, err, s.wantErr)
		}
		for _, c := range []struct {
			what string
			dev  string
			cls  Class
			dl   bool
			w    want
		}{{"video up", "v-a", video, false, s.up}, {"video down", ifb, video, true, s.down}, {"fixed up", "v-a", fixed, false, s.fixed}} {
			r, ce := kernelRates(t, ns, c.dev, c.cls.ClassID)
			if r != c.w.rate || ce != c.w.ceil {
				t.Errorf("%s: %s class rate %d ceil %d, want %d %d", s.name, c.what, r, ce, c.w.rate, c.w.ceil)
			}
			if gr, gc, err := e.LaneRates(c.cls.Lane, c.dl); err != nil || gr != c.w.rate || gc != c.w.ceil {
				t.Errorf("%s: LaneRates(%s) = %d %d %v", s.name, c.what, gr, gc, err)
			}
			leaf := c.cls
			if c.dl {
				leaf = leaf.download()
			}
			leaf = leaf.withCeil(c.w.ceil)
			if leaf.Leaf != LeafHeadDrop && leaf.Leaf != LeafBfifo {
				continue // fq_codel: its target is a time
			}
			if leaf.Leaf == LeafBfifo {
				floor := ingressFloor(mustLink(t, ns, "v-a"), e.ifaces["v-a"])
				leaf.Limit = max(leaf.Limit, floor)
			}
			kind, limit := leafLimit(t, ns, c.dev, c.cls.ClassID)
			if kind != string(leaf.Leaf) || limit != leaf.Limit {
				t.Errorf("%s: %s leaf %s limit %d, want %s limit %d (the target at ceil %d)", s.name, c.what, kind, limit, leaf.Leaf, leaf.Limit, c.w.ceil)
			}
		}
	}
}

// mustLink looks dev up in ns.
func mustLink(t *testing.T, ns, dev string) netlink.Link {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	l, err := nh.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
