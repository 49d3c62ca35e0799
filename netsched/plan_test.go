package netsched

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
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
		{"builtins-bfifo", "[net]\nrate = \"19mbit\"\n", "eth0", LeafBfifo},
		{"builtins-fqcodel-ingress", "[net]\nrate = \"100mbit\"\ningress = true\n", "wlan0", LeafFqCodel},
		{"user-lanes", `
[net]
rate = "19mbit"
[lanes.video]
net = { priority = 1, rate = "8mbit" }
[lanes.capped]
net = { priority = 2, ceil = "5mbit", target = "10ms" }
`, "eth0", LeafBfifo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := BuildPlan(mustParse(t, tt.toml), tt.iface, tt.leaf)
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
			again, _ := BuildPlan(mustParse(t, tt.toml), tt.iface, tt.leaf)
			if b, _ := json.MarshalIndent(again, "", "  "); !bytes.Equal(append(b, '\n'), got) {
				t.Error("BuildPlan is not deterministic")
			}
		})
	}
}

func TestBuildPlanProperties(t *testing.T) {
	cfg := mustParse(t, "[net]\nrate = \"19mbit\"\n")
	p, err := BuildPlan(cfg, "eth0", LeafBfifo)
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
		{"bfifo limit at least two packets", bg.Limit >= 2*MTU},
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
		{"nil config", nil, "eth0", LeafBfifo},
		{"no interface", good, "", LeafBfifo},
		{"zero rate", zero, "eth0", LeafBfifo},
		{"unknown leaf", good, "eth0", LeafKind("sfq")},
		{"rates above link", over, "eth0", LeafBfifo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := BuildPlan(tt.cfg, tt.iface, tt.leaf)
			if !errors.Is(err, ErrBadPlan) {
				t.Fatalf("BuildPlan = %v, want an error wrapping ErrBadPlan", err)
			}
		})
	}
	if _, err := lane.Parse("bad.toml", []byte("[net]\nrate = \"fast\"\n")); err == nil {
		t.Error("an unparsable rate was accepted by the config parser")
	}
}
