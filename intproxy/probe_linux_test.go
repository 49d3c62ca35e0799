package intproxy

import (
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// The proxy's mechanisms are present on the kernels lanes tests on (5.7
// and later, nftables NAT), and the redirect probe leaves the host's
// rules alone (it runs in a throwaway namespace).
func TestProbes(t *testing.T) {
	testutil.RequireRoot(t)
	if err := ProbeLaneLookup(); err != nil {
		t.Errorf("lane lookup: %v", err)
	}
	if err := ProbeRedirect(); err != nil {
		t.Errorf("redirect: %v", err)
	}
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range ts {
		if strings.HasPrefix(tb.Name, "lanes_proxy") {
			t.Errorf("table %s in the host's namespace", tb.Name)
		}
	}
	for _, m := range Mechanisms() {
		if !m.Preferred {
			t.Errorf("%s: fallback %q (%s)", m.Resource, m.Backend, m.Reason)
		}
	}
}
