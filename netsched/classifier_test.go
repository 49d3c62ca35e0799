package netsched

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/lane"
)

func TestPortBlocks(t *testing.T) {
	tests := []struct {
		lo, hi uint16
		want   []portBlock
	}{
		{5201, 5201, []portBlock{{5201, 0xffff}}},
		{5400, 5410, []portBlock{{5400, 0xfff8}, {5408, 0xfffe}, {5410, 0xffff}}},
		{6000, 6100, []portBlock{{6000, 0xfff0}, {6016, 0xffc0}, {6080, 0xfff0}, {6096, 0xfffc}, {6100, 0xffff}}},
		{32768, 65535, []portBlock{{32768, 0x8000}}},
		{1, 65535, nil}, // checked by coverage below: 16 blocks
	}
	for _, tt := range tests {
		got := portBlocks(tt.lo, tt.hi)
		if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("portBlocks(%d, %d) = %v, want %v", tt.lo, tt.hi, got, tt.want)
		}
	}
	if n := len(portBlocks(1, 65535)); n != 16 {
		t.Errorf("1-65535 takes %d blocks, want 16", n)
	}
	// Every port of the range is in exactly one block, no other port in any.
	for _, r := range [][2]uint16{{1, 1}, {1, 65535}, {65535, 65535}, {80, 443}, {1023, 1025}, {6000, 6100}, {32767, 32769}, {12345, 54321}} {
		blocks := portBlocks(r[0], r[1])
		if len(blocks) > 30 {
			t.Errorf("%d-%d: %d blocks, more than 30", r[0], r[1], len(blocks))
		}
		for port := 0; port <= 65535; port++ {
			n := 0
			for _, b := range blocks {
				if uint16(port)&b.Mask == b.Val {
					n++
				}
			}
			in := port >= int(r[0]) && port <= int(r[1])
			if (in && n != 1) || (!in && n != 0) {
				t.Fatalf("%d-%d: port %d in %d blocks %v", r[0], r[1], port, n, blocks)
			}
		}
	}
}

func TestParseClassifier(t *testing.T) {
	for _, c := range []Classifier{ClassifyAuto, ClassifyU32} {
		got, err := ParseClassifier(c.String())
		if err != nil || got != c {
			t.Errorf("ParseClassifier(%q) = %v, %v", c, got, err)
		}
	}
	if _, err := ParseClassifier("bpf"); err == nil || !strings.Contains(err.Error(), `unknown classifier "bpf"`) {
		t.Errorf("ParseClassifier(bpf) = %v", err)
	}
}

// TestBuildPlanPorts: a lane's port rules travel with its class.
func TestBuildPlanPorts(t *testing.T) {
	cfg := mustParse(t, "[net]\nrate = \"19mbit\"\n[lanes.video]\nnet.ports = [\"tcp/5301\", \"5400-5410\"]\n")
	p, err := BuildPlan(cfg, "eth0", Caps{Leaf: LeafHeadDrop})
	if err != nil {
		t.Fatal(err)
	}
	class := func(name string) Class {
		c, ok := p.Class(name)
		if !ok {
			t.Fatalf("plan has no lane %s", name)
		}
		return c
	}
	want := []lane.PortRule{{Proto: lane.ProtoTCP, Lo: 5301, Hi: 5301}, {Lo: 5400, Hi: 5410}}
	if got := class("video").Ports; !reflect.DeepEqual(got, want) {
		t.Errorf("video ports %v, want %v", got, want)
	}
	if got := class(lane.Normal).Ports; got != nil {
		t.Errorf("normal ports %v, want none", got)
	}
	cfg.Lanes["video"].Net.Ports[0].Lo = 1
	if class("video").Ports[0].Lo != 5301 {
		t.Error("the plan shares port rules with the config")
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"ports":["tcp/5301","5400-5410"]`) || strings.Count(string(b), `"ports"`) != 1 {
		t.Errorf("plan JSON %s: want the ports of video only", b)
	}
}

// TestBuildPlanTooManyPortRules: rules that need more u32 filters than a
// table holds are a bad plan, before anything is applied.
func TestBuildPlanTooManyPortRules(t *testing.T) {
	// Each "2-65534" needs a filter per block, protocol (2) and end (2).
	per := 4 * len(portBlocks(2, 65534))
	fit := maxPortNodes / per
	many := func(n int) string {
		return "[net]\nrate = \"19mbit\"\n[lanes.video]\nnet.ports = [" + strings.Repeat(`"2-65534", `, n) + "]\n"
	}
	if _, err := BuildPlan(mustParse(t, many(fit)), "eth0", Caps{Leaf: LeafHeadDrop}); err != nil {
		t.Errorf("%d wide ranges (%d filters): %v", fit, fit*per, err)
	}
	_, err := BuildPlan(mustParse(t, many(fit+1)), "eth0", Caps{Leaf: LeafHeadDrop})
	if want := fmt.Sprintf("need %d u32 filters", (fit+1)*per); !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), want) {
		t.Errorf("%d wide ranges: %v, want ErrBadPlan with %q", fit+1, err, want)
	}
}
