package workload

import (
	"strings"
	"testing"
)

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		err  string // "" = valid
	}{
		{"audio defaults", Spec{Name: "a", Kind: Audio}, ""},
		{"audio at the header size", Spec{Name: "a", Kind: Audio, PacketBytes: 12}, ""},
		{"audio below the header size", Spec{Name: "a", Kind: Audio, PacketBytes: 8}, "packet_bytes 8"},
		{"video without fps", Spec{Name: "v", Kind: Video, FrameBytes: 1000}, "video needs fps"},
		{"udp without a rate", Spec{Name: "u", Kind: IPerf3, Protocol: "udp"}, "udp needs a rate"},
		{"iperf3 marked LE", Spec{Name: "t", Kind: IPerf3, TOS: 4}, ""},
		{"tos above a byte", Spec{Name: "t", Kind: IPerf3, TOS: 256}, "tos 256"},
		{"negative tos", Spec{Name: "t", Kind: IPerf3, TOS: -1}, "tos -1"},
		{"tos on irtt", Spec{Name: "t", Kind: IRTT, TOS: 4}, "tos applies to iperf3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got %v, want an error with %q", err, tc.err)
			}
		})
	}
}
