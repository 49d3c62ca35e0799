package daemon

import (
	"reflect"
	"testing"

	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/netsched"
)

// The network plans' idletime part follows [net.idletime]: pi = "off"
// takes the gates away but keeps marking and following.
func TestIdletimeOf(t *testing.T) {
	bg := []string{lane.Background}
	for _, tc := range []struct {
		name, toml string
		want       netsched.Idletime
	}{
		{"defaults", "", netsched.Idletime{Lanes: bg, Mark: true}},
		{"ingress: follow", "[net]\ningress = true\n", netsched.Idletime{Lanes: bg, Mark: true, Follow: true}},
		{"pi off keeps mark and follow", "[net]\ningress = true\n[net.idletime]\npi = \"off\"\n",
			netsched.Idletime{Lanes: bg, Mark: true, Follow: true, NoHold: true}},
		{"pi off, no mark, no follow", "[net]\ningress = true\n[net.idletime]\npi = \"off\"\nmark = false\nfollow = false\n",
			netsched.Idletime{Lanes: bg, NoHold: true}},
		{"quiet interactive", "[net.idletime]\npi = \"20ms\"\n[lanes.interactive]\nnet = { preempts = false }\n",
			netsched.Idletime{Lanes: bg, Mark: true, Quiet: []string{lane.Interactive}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := lane.Parse("test.toml", []byte(tc.toml))
			if err != nil {
				t.Fatal(err)
			}
			if got := idletimeOf(cfg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("idletimeOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}
