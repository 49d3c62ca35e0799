package netprobe

import (
	"errors"
	"github.com/lanes-qos/lanes/internal/features"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestNetProbes checks that the network probes lanes relies on give
// conclusive answers: a qdisc kind that does not exist must be reported
// missing, and HTB (which lanes needs) present.
func TestNetProbes(t *testing.T) {
	testutil.RequireRoot(t)
	tests := []struct {
		name string
		err  error
	}{
		{"qdisc htb", HaveQdisc("htb")},
		{"qdisc bfifo", HaveQdisc("bfifo")},
		{"qdisc clsact", HaveQdisc("clsact")},
		{"qdisc fq_codel", HaveQdisc("fq_codel")},
		{"qdisc no-such-kind", HaveQdisc("lanesnosuch")},
		{"ifb", HaveIFB()},
		{"u32 + mirred", HaveMirredRedirect()},
		{"cgroup sock program", HaveBPFProgramType(ebpf.CGroupSock)},
		{"sk_lookup_tcp in tc", HaveBPFHelper(ebpf.SchedCLS, asm.FnSkLookupTcp)},
		{"skb_ancestor_cgroup_id in tc", HaveBPFHelper(ebpf.SchedCLS, asm.FnSkbAncestorCgroupId)},
		{"sk_storage_get in tc", HaveBPFHelper(ebpf.SchedCLS, asm.FnSkStorageGet)},
		{"get_current_ancestor_cgroup_id in cgroup sock", HaveBPFHelper(ebpf.CGroupSock, asm.FnGetCurrentAncestorCgroupId)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err != nil && !errors.Is(tt.err, features.ErrNotSupported) {
				t.Fatalf("inconclusive: %v", tt.err)
			}
			t.Logf("%s: %v", tt.name, tt.err)
		})
	}
	if err := HaveQdisc("lanesnosuch"); !errors.Is(err, features.ErrNotSupported) {
		t.Errorf("HaveQdisc(lanesnosuch) = %v, want features.ErrNotSupported", err)
	}
	if err := HaveQdisc("htb"); err != nil {
		t.Errorf("HaveQdisc(htb) = %v; lanes needs HTB", err)
	}
}
