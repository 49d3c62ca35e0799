package vmlane

import (
	"strings"
	"testing"
)

func TestRootfsKey(t *testing.T) {
	base := rootfsKey("bookworm", "minbase", []string{"systemd", "dbus"}, 1)
	if !strings.HasPrefix(base, "bookworm-") || len(base) != len("bookworm-")+12 {
		t.Errorf("key %q, want bookworm- and 12 hex digits", base)
	}
	tests := []struct {
		name     string
		key      string
		sameBase bool
	}{
		{"same inputs", rootfsKey("bookworm", "minbase", []string{"systemd", "dbus"}, 1), true},
		{"package order does not matter", rootfsKey("bookworm", "minbase", []string{"dbus", "systemd"}, 1), true},
		{"another package", rootfsKey("bookworm", "minbase", []string{"systemd", "dbus", "curl"}, 1), false},
		{"another format", rootfsKey("bookworm", "minbase", []string{"systemd", "dbus"}, 2), false},
		{"another variant", rootfsKey("bookworm", "buildd", []string{"systemd", "dbus"}, 1), false},
		{"another suite", rootfsKey("trixie", "minbase", []string{"systemd", "dbus"}, 1), false},
	}
	for _, tt := range tests {
		if (tt.key == base) != tt.sameBase {
			t.Errorf("%s: key %q, base %q", tt.name, tt.key, base)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	tests := map[string]string{
		"/var/cache/x":           "/var/cache/x",
		`/mnt/with\040space`:     "/mnt/with space",
		`/a\011tab\134backslash`: "/a\ttab\\backslash",
		`/trailing\04`:           `/trailing\04`,
		`/not\0octal\089`:        `/not\0octal\089`,
	}
	for in, want := range tests {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
