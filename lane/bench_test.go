package lane

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func BenchmarkParseExample(b *testing.B) {
	data, err := os.ReadFile("../docs/example.toml")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse("example.toml", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatch100Rules matches a process that only the last of 100
// rules matches: the cost of deciding a lane on each exec.
func BenchmarkMatch100Rules(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 99; i++ {
		fmt.Fprintf(&sb, "[[rule]]\nlane = \"background\"\nexe = \"/opt/**/tool%d\"\ncgroup = \"/system.slice\"\n", i)
	}
	sb.WriteString("[[rule]]\nlane = \"interactive\"\nunit = \"backup.service\"\n")
	c, err := Parse("bench.toml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	p := Process{Exe: "/opt/a/b/c/tool", Comm: "tool", Cgroup: "/system.slice/backup.service"}
	for b.Loop() {
		if l, _ := c.Match(p); l != Interactive {
			b.Fatalf("matched %q", l)
		}
	}
}
