package lane

import "testing"

func TestMatch(t *testing.T) {
	const file = `[lanes.video]
[lanes.build]

[[rule]]
lane = "video"
exe = "/usr/lib/**/zoom"

[[rule]]
lane = "build"
comm = "make"
user = "alice"

[[rule]]
lane = "background"
comm = "make"

[[rule]]
lane = "background"
exe = "rsync"

[[rule]]
lane = "interactive"
user = "1000"
cgroup = "/user.slice"

[[rule]]
lane = "background"
unit = "backup.service"

[[rule]]
lane = "normal"
exe = "/opt/*/bin/tool"
`
	c, err := Parse("lanes.toml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		p        Process
		want     string
		wantLine int
	}{
		{"exe ** zero elements", Process{Exe: "/usr/lib/zoom"}, "video", 4},
		{"exe ** several elements", Process{Exe: "/usr/lib/x/y/zoom"}, "video", 4},
		{"exe ** wrong base", Process{Exe: "/usr/lib/x/zoomer"}, "", 0},
		{"exe ** outside prefix", Process{Exe: "/usr/bin/zoom"}, "", 0},
		{"exe * is one element", Process{Exe: "/opt/acme/bin/tool"}, "normal", 30},
		{"exe * not two elements", Process{Exe: "/opt/a/b/bin/tool"}, "", 0},
		{"exe without slash matches base name", Process{Exe: "/usr/local/bin/rsync"}, "background", 17},
		{"exe unknown never matches", Process{Comm: "rsync"}, "", 0},
		{"all fields AND: both match", Process{Comm: "make", User: "alice", UID: 1001}, "build", 8},
		{"all fields AND: user differs, next rule", Process{Comm: "make", User: "bob", UID: 1002}, "background", 13},
		{"comm exact", Process{Comm: "makes"}, "", 0},
		{"user by uid and cgroup prefix", Process{UID: 1000, User: "carol", Cgroup: "/user.slice/user-1000.slice/session-2.scope"}, "interactive", 21},
		{"user by uid, cgroup exact", Process{UID: 1000, Cgroup: "/user.slice"}, "interactive", 21},
		{"cgroup prefix on element boundary", Process{UID: 1000, Cgroup: "/user.slicex/a"}, "", 0},
		{"uid differs", Process{UID: 1001, Cgroup: "/user.slice/x"}, "", 0},
		{"unit from cgroup", Process{Cgroup: "/system.slice/backup.service"}, "background", 26},
		{"unit given", Process{Unit: "backup.service", Cgroup: "/x"}, "background", 26},
		{"unit differs", Process{Cgroup: "/system.slice/backup.timer.service"}, "", 0},
		{"first match wins", Process{Exe: "/usr/lib/zoom", Comm: "make"}, "video", 4},
		{"nothing", Process{}, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, r := c.Match(tt.p)
			if got != tt.want {
				t.Fatalf("Match(%+v) = %q, want %q", tt.p, got, tt.want)
			}
			switch {
			case tt.want == "" && r != nil:
				t.Errorf("no lane but rule %+v", *r)
			case tt.want != "" && (r == nil || r.Line != tt.wantLine || r.Lane != got):
				t.Errorf("rule %+v, want the rule at line %d", r, tt.wantLine)
			}
		})
	}
}

func TestMatchUserByName(t *testing.T) {
	r := Rule{Lane: Normal, User: "alice"}
	tests := []struct {
		p    Process
		want bool
	}{
		{Process{User: "alice", UID: 1001}, true},
		{Process{User: "bob", UID: 1001}, false},
		{Process{UID: 1001}, false}, // name unknown
	}
	for _, tt := range tests {
		if got := r.Matches(tt.p); got != tt.want {
			t.Errorf("Matches(%+v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if (&Rule{Lane: Normal}).Matches(Process{Comm: "x"}) {
		t.Error("a rule without match fields matched")
	}
}

func TestUnitOf(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/system.slice/backup.service", "backup.service"},
		{"/system.slice/docker.service/sub", "docker.service"},
		{"/user.slice/user-1000.slice/session-2.scope", "session-2.scope"},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-firefox-1.scope", "app-firefox-1.scope"},
		{"/user.slice/user-1000.slice/user@1000.service/init.scope", "init.scope"},
		{"/system.slice/var-lib.mount", "var-lib.mount"},
		{"/system.slice/sshd.socket", "sshd.socket"},
		{"/init.scope", "init.scope"},
		{"/user.slice", ""},
		{"/", ""},
		{"", ""},
		{"/lanes/background", ""},
		{"/.service", ""},
	}
	for _, tt := range tests {
		if got := UnitOf(tt.in); got != tt.want {
			t.Errorf("UnitOf(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCgroupHasPrefix(t *testing.T) {
	tests := []struct {
		path, prefix string
		want         bool
	}{
		{"/user.slice/x", "/user.slice", true},
		{"/user.slice", "/user.slice", true},
		{"/user.slice/x", "/user.slice/", true},
		{"/user.slicex", "/user.slice", false},
		{"/user.slicex/y", "/user.slice", false},
		{"/system.slice", "/user.slice", false},
		{"/anything", "/", true},
		{"", "/", false},
		{"/a", "/a/b", false},
	}
	for _, tt := range tests {
		if got := CgroupHasPrefix(tt.path, tt.prefix); got != tt.want {
			t.Errorf("CgroupHasPrefix(%q, %q) = %v, want %v", tt.path, tt.prefix, got, tt.want)
		}
	}
}
