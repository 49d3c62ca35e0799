package monitor

import "testing"

func TestCgroupPath(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"v2 only", "0::/user.slice/user-1000.slice/session-2.scope\n", "/user.slice/user-1000.slice/session-2.scope"},
		{"hybrid prefers systemd", "9:name=systemd:/system.slice/backup.service\n1:cpu:/\n0::/lanes/background\n", "/system.slice/backup.service"},
		{"legacy without v2 line", "3:cpu,cpuacct:/x\n1:name=systemd:/init.scope\n", "/init.scope"},
		{"no usable line", "3:cpu,cpuacct:/x\n", ""},
		{"empty", "", ""},
		{"path with colon", "0::/a:b\n", "/a:b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CgroupPath([]byte(tt.in)); got != tt.want {
				t.Errorf("CgroupPath = %q, want %q", got, tt.want)
			}
		})
	}
}
