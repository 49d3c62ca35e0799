package netprobe

import (
	"strings"
	"testing"

	"github.com/lanes-qos/lanes/internal/features"
)

// How probe answers read as `lanes doctor` lines, for lanesd and without
// a daemon alike.
func TestNetMechanisms(t *testing.T) {
	missing := features.Missing("qdisc fq_codel", "CONFIG_NET_SCH_FQ_CODEL", nil)
	noIFB := features.Missing("ifb device", "CONFIG_IFB", nil)
	type line struct {
		backend   string // prefix
		ok, pref  bool
		reasonHas string
	}
	cases := []struct {
		name string
		n    Net
		want map[string]line
	}{
		{"everything, loaded", Net{Loaded: true}, map[string]line{
			"net scheduling":     {"HTB, one class per lane, leaf fq_codel", true, true, "fq_codel present"},
			"net classification": {"BPF cgroup sock_create", true, true, "probed"},
			"net ingress":        {"IFB + HTB (u32 + mirred redirect), lane from the local socket", true, true, "probed"},
			"net idletime":       {"tbf hold", true, true, "compare-and-swap in tc programs;"},
		}},
		{"probed only", Net{}, map[string]line{
			"net idletime": {"tbf hold", true, true, "checked when lanesd loads its programs"},
		}},
		{"no fq_codel", Net{FqCodel: missing}, map[string]line{
			"net scheduling": {"HTB, one class per lane, leaf pfifo_head_drop", true, false, "CONFIG_NET_SCH_FQ_CODEL"},
		}},
		{"no HTB: nothing else", Net{HTB: features.Missing("qdisc htb", "CONFIG_NET_SCH_HTB", nil)}, map[string]line{
			"net scheduling": {"none", false, false, "CONFIG_NET_SCH_HTB"},
		}},
		{"ports forced", Net{Classifier: ErrU32Forced, Ingress: ErrU32Forced, Idle: ErrU32Forced}, map[string]line{
			"net classification": {"u32 port rules", true, false, ErrU32Forced.Error()},
			"net ingress":        {"IFB + HTB (u32 + mirred redirect), lane from u32 port rules", true, false, ErrU32Forced.Error()},
			"net idletime":       {"none", false, false, ErrU32Forced.Error()},
		}},
		{"no IFB", Net{Ingress: noIFB, IngressPorts: noIFB}, map[string]line{
			"net ingress": {"none: downloads are not shaped", false, false, "CONFIG_IFB"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]features.Mechanism{}
			for _, m := range tc.n.Mechanisms() {
				got[m.Resource] = m
			}
			if tc.n.HTB != nil && len(got) != 1 {
				t.Errorf("without HTB: %d lines, want 1", len(got))
			}
			for res, w := range tc.want {
				m, ok := got[res]
				switch {
				case !ok:
					t.Errorf("%s: missing", res)
				case !strings.HasPrefix(m.Backend, w.backend) || m.OK != w.ok || m.Preferred != w.pref || !strings.Contains(m.Reason, w.reasonHas):
					t.Errorf("%s: %q ok %v preferred %v %q; want %q… ok %v preferred %v, reason with %q", res, m.Backend, m.OK, m.Preferred, m.Reason, w.backend, w.ok, w.pref, w.reasonHas)
				}
			}
		})
	}
	ms := Net{}.Mechanisms(features.Mechanism{Resource: "net link x0"})
	if n := len(ms); n < 2 || ms[n-2].Resource != "net link x0" || ms[n-1].Resource != "net background transport" {
		t.Errorf("interface lines do not come just before the background transport's: %+v", ms)
	}
}
