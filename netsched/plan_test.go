package netsched

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/lanes-qos/lanes/lane"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func mustParse(t *testing.T, toml string) *lane.Config {
	t.Helper()
	cfg, err := lane.Parse("test.toml", []byte(toml))
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	return cfg
}

func TestBuildPlanGolden(t *testing.T) {
	tests := []struct {
		name  string
		toml  string
		iface string
		leaf  LeafKind
	}{
		{"builtins-headdrop", "[net]\nrate = \"19mbit\"\n", "eth0", LeafHeadDrop},
		{"builtins-fqcodel-ingress", "[net]\nrate = \"100mbit\"\ningress = true\n", "wlan0", LeafFqCodel},
		{"user-lanes", `
[net]
rate = "19mbit"
[lanes.video]
net = { priority = 1, rate = "8mbit" }
[lanes.capped]
net = { priority = 2, ceil = "5mbit", target = "10ms" }
`, "eth0", LeafHeadDrop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := BuildPlan(mustParse(t, tt.toml), tt.iface, Caps{Leaf: tt.leaf})
			if err != nil {
				t.Fatalf("BuildPlan: %v", err)
			}
			got, err := json.MarshalIndent(p, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden file (run with -update to create it): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("plan differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
			}
			again, _ := BuildPlan(mustParse(t, tt.toml), tt.iface, Caps{Leaf: tt.leaf})
			if b, _ := json.MarshalIndent(again, "", "  "); !bytes.Equal(append(b, '\n'), got) {
				t.Error("BuildPlan is not deterministic")
			}
		})
	}
}

func TestBuildPlanProperties(t *testing.T) {
	cfg := mustParse(t, "[net]\nrate = \"19mbit\"\n")
	p, err := BuildPlan(cfg, "eth0", Caps{Leaf: LeafHeadDrop})
	if err != nil {
		t.Fatal(err)
	}
	bg, _ := p.Class(lane.Background)
	nm, _ := p.Class(lane.Normal)
	ia, _ := p.Class(lane.Interactive)
	tests := []struct {
		name string
		ok   bool
	}{
		{"background served last", bg.Prio > nm.Prio && nm.Prio > ia.Prio},
		{"background guaranteed at most 1% (it only borrows)", bg.Rate*100 <= p.Rate},
		{"every lane may use the whole link", bg.Ceil == p.Rate && nm.Ceil == p.Rate && ia.Ceil == p.Rate},
		{"interactive queue shorter than normal", ia.Limit < nm.Limit},
		{"default class is normal", p.Default == nm.ClassID},
		{"head-drop limit at least minLeafPackets", bg.Limit >= minLeafPackets && ia.Limit >= minLeafPackets},
		{"class ids under the lanes major", nm.ClassID>>16 == Major && bg.ClassID>>16 == Major},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: plan %+v", tt.name, p)
		}
	}
}

func TestBuildPlanBadInput(t *testing.T) {
	good := mustParse(t, "[net]\nrate = \"19mbit\"\n")
	zero := mustParse(t, "")
	over := good.Clone()
	over.Lanes[lane.Normal].Net.Rate = 15e6
	over.Lanes[lane.Interactive].Net.Rate = 10e6
	tests := []struct {
		name  string
		cfg   *lane.Config
		iface string
		leaf  LeafKind
	}{
		{"nil config", nil, "eth0", LeafHeadDrop},
		{"no interface", good, "", LeafHeadDrop},
		{"zero rate", zero, "eth0", LeafHeadDrop},
		{"unknown leaf", good, "eth0", LeafKind("sfq")},
		{"rates above link", over, "eth0", LeafHeadDrop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildPlan(tt.cfg, tt.iface, Caps{Leaf: tt.leaf})
			if !errors.Is(err, ErrBadPlan) {
				t.Fatalf("BuildPlan = %v, want an error wrapping ErrBadPlan", err)
			}
		})
	}
	if _, err := lane.Parse("bad.toml", []byte("[net]\nrate = \"fast\"\n")); err == nil {
		t.Error("an unparsable rate was accepted by the config parser")
	}
}

// TestBorrow: net.borrow as docs/CONFIG.md gives it. A lane with a rate
// that may not borrow is capped at its rate; one that may borrow goes up
// to its ceil or the link; lanes without a rate keep the link as their
// ceiling, a borrowing one (background) guaranteed only the floor.
func TestBorrow(t *testing.T) {
	const link = 19_000_000
	tests := []struct {
		name     string
		net      string
		wantRate uint64
		wantCeil uint64
	}{
		{"rate, no borrow: capped at its rate", `{ rate = "8mbit" }`, 8_000_000, 8_000_000},
		{"rate, borrow false: capped at its rate", `{ rate = "8mbit", borrow = false }`, 8_000_000, 8_000_000},
		{"rate, borrow: up to the link", `{ rate = "8mbit", borrow = true }`, 8_000_000, link},
		{"rate, borrow, ceil: up to the ceil", `{ rate = "8mbit", ceil = "12mbit", borrow = true }`, 8_000_000, 12_000_000},
		{"rate equal to ceil, no borrow", `{ rate = "8mbit", ceil = "8mbit" }`, 8_000_000, 8_000_000},
		{"no rate, borrow: the floor, up to the link", `{ borrow = true }`, link / 100, link},
		{"no rate, no borrow: a share, up to the link", `{ priority = 2 }`, 0, link},
		{"no rate, ceil", `{ ceil = "5mbit" }`, 0, 5_000_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := BuildPlan(mustParse(t, "[net]\nrate = \"19mbit\"\n[lanes.x]\nnet = "+tt.net+"\n"), "eth0", Caps{Leaf: LeafHeadDrop})
			if err != nil {
				t.Fatal(err)
			}
			c, _ := p.Class("x")
			if (tt.wantRate != 0 && c.Rate != tt.wantRate) || c.Rate == 0 || c.Ceil != tt.wantCeil || c.Rate > c.Ceil {
				t.Errorf("class rate %d ceil %d, want rate %d ceil %d", c.Rate, c.Ceil, tt.wantRate, tt.wantCeil)
			}
		})
	}
	// The plan refuses what the config parser refuses, for a config built
	// in code.
	cfg := mustParse(t, "[net]\nrate = \"19mbit\"\n[lanes.x]\nnet = { rate = \"8mbit\", borrow = true, ceil = \"12mbit\" }\n")
	cfg.Lanes["x"].Net.Borrow = false
	if _, err := BuildPlan(cfg, "eth0", Caps{Leaf: LeafHeadDrop}); !errors.Is(err, ErrBadPlan) {
		t.Errorf("ceil above rate without borrow: %v, want ErrBadPlan", err)
	}
}

// TestWithIdletimeLanes: idletime lanes get a TBF leaf with a byte limit and
// their own handle; Mark and Follow are set; bad requests fail.
func TestWithIdletimeLanes(t *testing.T) {
	const cfg = "[net]\nrate = \"100mbit\"\ningress = true\n[lanes.bulk]\nnet = { priority = 6, borrow = true }\n"
	bg := ClassID(Major, backgroundMinor)
	tests := []struct {
		name       string
		leaf       LeafKind
		o          idletimeSpec
		wantErr    bool
		wantIdle   []string
		wantFollow uint32
	}{
		{"off", LeafHeadDrop, idletimeSpec{}, false, nil, 0},
		{"background, head-drop plan", LeafHeadDrop, idletimeSpec{Lanes: []string{lane.Background}}, false, []string{lane.Background}, 0},
		{"two lanes, fq_codel plan, mark and follow", LeafFqCodel, idletimeSpec{Lanes: []string{"bulk", lane.Background}, Mark: true, Follow: true}, false, []string{lane.Background, "bulk"}, bg},
		{"unknown lane", LeafHeadDrop, idletimeSpec{Lanes: []string{"nope"}}, true, nil, 0},
		{"the default lane", LeafHeadDrop, idletimeSpec{Lanes: []string{lane.Normal}}, true, nil, 0},
		{"quiet interactive", LeafHeadDrop, idletimeSpec{Lanes: []string{lane.Background}, Quiet: []string{lane.Interactive, lane.Background}}, false, []string{lane.Background}, 0},
		{"unknown quiet lane", LeafHeadDrop, idletimeSpec{Lanes: []string{lane.Background}, Quiet: []string{"nope"}}, true, nil, 0},
		// pi = "off": no gates, but marked and followed.
		{"no hold, mark and follow", LeafHeadDrop, idletimeSpec{Lanes: []string{lane.Background}, Mark: true, Follow: true, NoHold: true, Quiet: []string{lane.Interactive}}, false, nil, bg},
		{"no hold, fq_codel plan", LeafFqCodel, idletimeSpec{Lanes: []string{"bulk", lane.Background}, Follow: true, NoHold: true}, false, nil, bg},
		{"no hold, the default lane", LeafHeadDrop, idletimeSpec{Lanes: []string{lane.Normal}, NoHold: true}, true, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := buildTree(mustParse(t, cfg), "eth0", tt.leaf)
			if err != nil {
				t.Fatal(err)
			}
			orig := slices.Clone(p.Classes)
			q, err := p.withIdletime(tt.o)
			if (err != nil) != tt.wantErr {
				t.Fatalf("withIdletime: %v, want error %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(p.Classes, orig) {
				t.Error("withIdletime modified its receiver's classes")
			}
			if err != nil {
				return
			}
			var idle []string
			for _, c := range q.Classes {
				if wantQuiet := !c.Idle && !tt.o.NoHold && slices.Contains(tt.o.Quiet, c.Lane); c.Quiet != wantQuiet {
					t.Errorf("lane %s: quiet %v, want %v", c.Lane, c.Quiet, wantQuiet)
				}
				if !c.Idle {
					wantMark := tt.o.NoHold && tt.o.Mark && slices.Contains(tt.o.Lanes, c.Lane)
					if c.Leaf != tt.leaf || c.Mark != wantMark {
						t.Errorf("lane %s changed: %+v", c.Lane, c)
					}
					continue
				}
				idle = append(idle, c.Lane)
				if c.Leaf != LeafTbf || c.Limit < 2*MTU || c.LeafHandle>>16 != uint32(tbfMajorBase)+c.ClassID&0xffff || c.Mark != tt.o.Mark {
					t.Errorf("idletime lane %s: %+v", c.Lane, c)
				}
			}
			if !slices.Equal(idle, tt.wantIdle) || q.Follow != tt.wantFollow || q.Idle() != (len(tt.wantIdle) > 0) {
				t.Errorf("idle lanes %v follow %x, want %v follow %x", idle, q.Follow, tt.wantIdle, tt.wantFollow)
			}
		})
	}
	p, _ := buildTree(mustParse(t, "[net]\nrate = \"100mbit\"\n"), "eth0", LeafHeadDrop)
	if _, err := p.withIdletime(idletimeSpec{Lanes: []string{lane.Background}, Follow: true}); !errors.Is(err, ErrBadPlan) {
		t.Errorf("follow without ingress: %v, want ErrBadPlan", err)
	}
}

// TestIdletimeOf: the plans' idletime part follows [net.idletime] and the
// lanes' net.idletime and net.preempts; pi = "off" takes the gates away
// but keeps marking and following.
func TestIdletimeOf(t *testing.T) {
	bg := []string{lane.Background}
	for _, tc := range []struct {
		name, toml string
		want       idletimeSpec
	}{
		{"defaults", "", idletimeSpec{Lanes: bg, Mark: true}},
		{"ingress: follow", "[net]\ningress = true\n", idletimeSpec{Lanes: bg, Mark: true, Follow: true}},
		{"pi off keeps mark and follow", "[net]\ningress = true\n[net.idletime]\npi = \"off\"\n",
			idletimeSpec{Lanes: bg, Mark: true, Follow: true, NoHold: true}},
		{"pi off, no mark, no follow", "[net]\ningress = true\n[net.idletime]\npi = \"off\"\nmark = false\nfollow = false\n",
			idletimeSpec{Lanes: bg, NoHold: true}},
		{"quiet interactive", "[net.idletime]\npi = \"20ms\"\n[lanes.interactive]\nnet = { preempts = false }\n",
			idletimeSpec{Lanes: bg, Mark: true, Quiet: []string{lane.Interactive}}},
		{"no idletime lane", "[lanes.background]\nnet.idletime = false\n", idletimeSpec{Mark: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.toml)
			if got := idletimeOf(cfg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("idletimeOf = %+v, want %+v", got, tc.want)
			}
			if WantsIdletime(cfg) != (len(tc.want.Lanes) > 0) {
				t.Errorf("WantsIdletime = %v with idletime lanes %v", WantsIdletime(cfg), tc.want.Lanes)
			}
		})
	}
}

// TestBuildPlanIdletime: BuildPlan gives the config's idletime lanes
// their gates where the kernel can build them, and leaves them plain
// classes where it cannot; pi = "off" keeps only marking.
func TestBuildPlanIdletime(t *testing.T) {
	const ingress = "[net]\nrate = \"100mbit\"\ningress = true\n"
	bg := ClassID(Major, backgroundMinor)
	tests := []struct {
		name       string
		toml       string
		caps       Caps
		wantLeaf   LeafKind
		wantIdle   bool
		wantMark   bool
		wantFollow uint32
	}{
		{"defaults", ingress, Caps{Leaf: LeafHeadDrop}, LeafTbf, true, true, bg},
		{"no ingress: no follow", "[net]\nrate = \"100mbit\"\n", Caps{Leaf: LeafFqCodel}, LeafTbf, true, true, 0},
		{"kernel without gates", ingress, Caps{Leaf: LeafFqCodel, Idletime: errors.New("no ring buffer")}, LeafFqCodel, false, false, 0},
		{"pi off", ingress + "[net.idletime]\npi = \"off\"\n", Caps{Leaf: LeafHeadDrop}, LeafHeadDrop, false, true, bg},
		{"background not idletime", ingress + "[lanes.background]\nnet.idletime = false\n", Caps{Leaf: LeafHeadDrop}, LeafHeadDrop, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := BuildPlan(mustParse(t, tt.toml), "eth0", tt.caps)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := p.Class(lane.Background)
			if c.Leaf != tt.wantLeaf || c.Idle != tt.wantIdle || c.Mark != tt.wantMark || p.Follow != tt.wantFollow || p.Idle() != tt.wantIdle {
				t.Errorf("background %+v, plan follow %x; want leaf %s idle %v mark %v follow %x", c, p.Follow, tt.wantLeaf, tt.wantIdle, tt.wantMark, tt.wantFollow)
			}
		})
	}
	// A config built in code that asks for the impossible is refused.
	cfg := mustParse(t, ingress)
	cfg.Lanes[lane.Normal].Net.Idletime = true
	if _, err := BuildPlan(cfg, "eth0", Caps{Leaf: LeafHeadDrop}); !errors.Is(err, ErrBadPlan) {
		t.Errorf("the default lane as idletime lane: %v, want ErrBadPlan", err)
	}
}

// The socket plan numbers lanes as the trees do (so a socket's label does
// not change when a rate is set or dropped), marks the idletime lanes
// unless [net.idletime] mark is off, and carries each lane's net.cc.
func TestBuildSocketPlan(t *testing.T) {
	tests := []struct {
		name      string
		toml      string
		acts      bool
		marked    []string
		ledbat    []string
		matchTree bool // compare the class ids with a tree's (needs a rate)
	}{
		{name: "defaults", toml: ``, acts: true, marked: []string{lane.Background}, ledbat: []string{lane.Background}},
		{name: "mark off", toml: "[net.idletime]\nmark = false\n", acts: true, ledbat: []string{lane.Background}},
		{name: "pi off still marks", toml: "[net.idletime]\npi = \"off\"\n", acts: true, marked: []string{lane.Background}, ledbat: []string{lane.Background}},
		{name: "nothing asked", toml: "[net.idletime]\nmark = false\n[lanes.background]\nnet = { cc = \"\" }\n", acts: false},
		{name: "a lane of its own", toml: "[lanes.bulk]\nnet = { priority = 6, cc = \"ledbat\" }\n[lanes.background]\nnet = { cc = \"\" }\n", acts: true, marked: []string{lane.Background}, ledbat: []string{"bulk"}},
		{name: "same ids as the trees", toml: "[net]\nrate = \"10mbit\"\n[lanes.bulk]\nnet = { priority = 6 }\n[lanes.video]\nnet = { priority = 2 }\n", acts: true, marked: []string{lane.Background}, ledbat: []string{lane.Background}, matchTree: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, tc.toml)
			sp, err := BuildSocketPlan(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if sp.Acts() != tc.acts {
				t.Errorf("Acts() = %v, want %v", sp.Acts(), tc.acts)
			}
			var marked, ledbat []string
			for _, c := range sp.Classes {
				if c.ClassID>>16 != Major || c.ClassID&0xffff == 0 {
					t.Errorf("lane %s: class id %x not under the lanes major", c.Lane, c.ClassID)
				}
				if c.Mark {
					marked = append(marked, c.Lane)
				}
				if c.CC == lane.CCLedbat {
					ledbat = append(ledbat, c.Lane)
				}
			}
			if !slices.Equal(marked, tc.marked) || !slices.Equal(ledbat, tc.ledbat) {
				t.Errorf("marked %v, ledbat %v; want %v, %v", marked, ledbat, tc.marked, tc.ledbat)
			}
			if len(sp.Classes) != len(cfg.Lanes) {
				t.Errorf("%d classes for %d lanes", len(sp.Classes), len(cfg.Lanes))
			}
			if tc.matchTree {
				p, err := BuildPlan(cfg, "eth0", Caps{Leaf: LeafFqCodel})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range p.Classes {
					if s, ok := sp.Class(c.Lane); !ok || s.ClassID != c.ClassID {
						t.Errorf("lane %s: tree class %x, socket class %x", c.Lane, c.ClassID, s.ClassID)
					}
				}
			}
		})
	}
}
