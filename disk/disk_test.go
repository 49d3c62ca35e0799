package disk

import (
	"testing"

	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/lane"
)

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		class lane.IOClass
		level int
		raw   uint16
		back  int // level Decode returns
	}{
		{lane.IONone, 0, 0, 0},
		{lane.IORealtime, 0, 1 << 13, 0},
		{lane.IORealtime, 7, 1<<13 | 7, 7},
		{lane.IOBestEffort, 4, 2<<13 | 4, 4},
		{lane.IOIdle, 0, 3 << 13, 0},
		{lane.IOIdle, 5, 3 << 13, 0}, // the idle class has no levels
	}
	for _, tt := range tests {
		raw, err := Encode(tt.class, tt.level)
		if err != nil || raw != tt.raw {
			t.Errorf("Encode(%q, %d) = %#x, %v; want %#x", tt.class, tt.level, raw, err, tt.raw)
		}
		c, l, err := Decode(tt.raw)
		if err != nil || c != tt.class || l != tt.back {
			t.Errorf("Decode(%#x) = %q, %d, %v; want %q, %d", tt.raw, c, l, err, tt.class, tt.back)
		}
	}
	for _, bad := range []struct {
		class lane.IOClass
		level int
	}{{lane.IOBestEffort, 8}, {lane.IOBestEffort, -1}, {"turbo", 0}} {
		if _, err := Encode(bad.class, bad.level); err == nil {
			t.Errorf("Encode(%q, %d) succeeded", bad.class, bad.level)
		}
	}
	if _, _, err := Decode(5 << 13); err == nil {
		t.Error("Decode(class 5) succeeded")
	}
}

func TestWeightSetting(t *testing.T) {
	tests := []struct {
		b                 weightBackend
		w                 int
		ok                bool
		ctrl, file, value string
	}{
		{weightNone, 500, false, "", "", ""},
		{weightV2, 0, true, cgroup.Blkio, "io.weight", "default 100"},
		{weightV2, 500, true, cgroup.Blkio, "io.weight", "default 500"},
		{weightV2, 20000, true, cgroup.Blkio, "io.weight", "default 10000"},
		{weightBFQ, 0, true, cgroup.Blkio, "blkio.bfq.weight", "100"},
		{weightBFQ, 10, true, cgroup.Blkio, "blkio.bfq.weight", "10"},
		{weightBFQ, 5000, true, cgroup.Blkio, "blkio.bfq.weight", "1000"},
	}
	for _, tt := range tests {
		ctrl, file, value, ok := weightSetting(tt.b, tt.w)
		if ok != tt.ok || ctrl != tt.ctrl || file != tt.file || value != tt.value {
			t.Errorf("weightSetting(%d, %d) = %q %q %q %v; want %q %q %q %v",
				tt.b, tt.w, ctrl, file, value, ok, tt.ctrl, tt.file, tt.value, tt.ok)
		}
	}
}

func TestSameWeight(t *testing.T) {
	tests := []struct {
		cur, want string
		same      bool
	}{
		{"default 100", "default 100", true},
		{"default 100\n8:0 200", "default 100", true},
		{"default  100", "default 100", true},
		{"default 200", "default 100", false},
		{"100", "100", true},
		{"100", "500", false},
	}
	for _, tt := range tests {
		if got := sameWeight(tt.cur, tt.want); got != tt.same {
			t.Errorf("sameWeight(%q, %q) = %v, want %v", tt.cur, tt.want, got, tt.same)
		}
	}
}

func TestSchedulerText(t *testing.T) {
	tests := []struct{ text, want string }{
		{"none [mq-deadline] kyber bfq\n", "mq-deadline"},
		{"[none] mq-deadline kyber bfq", "none"},
		{"mq-deadline kyber [bfq]", "bfq"},
		{"none", ""},
	}
	for _, tt := range tests {
		if got := ActiveScheduler(tt.text); got != tt.want {
			t.Errorf("ActiveScheduler(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
	got := describeSchedulers(map[string]string{"vda": "mq-deadline", "sdb": "bfq", "nvme0n1": "none"})
	want := "ioprio classes act on sdb (bfq), vda (mq-deadline); bfq weights on sdb; ignored by nvme0n1 (none)"
	if got != want {
		t.Errorf("describeSchedulers = %q\nwant %q", got, want)
	}
	if got := describeSchedulers(nil); got != "ioprio classes act on no device; bfq weights on no device" {
		t.Errorf("describeSchedulers(nil) = %q", got)
	}
}
