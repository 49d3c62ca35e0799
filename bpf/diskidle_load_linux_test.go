package bpf

import (
	"testing"

	"github.com/cilium/ebpf/link"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestLoadDiskidle loads the disk idletime program through the verifier
// and attaches it to block_bio_queue: it fails when the kernel lacks the
// tracepoint's BTF, the ring buffer or the compare-and-swap it uses.
func TestLoadDiskidle(t *testing.T) {
	testutil.RequireRoot(t)
	var objs DiskidleObjects
	if err := LoadDiskidleObjects(&objs, nil); err != nil {
		t.Fatalf("load diskidle objects: %v", err)
	}
	defer objs.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: objs.DiskidleBioQueue})
	if err != nil {
		t.Fatalf("attach diskidle_bio_queue: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
}
