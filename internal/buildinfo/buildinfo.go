package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/lanes-qos/lanes/api"
)

// Commit is the VCS revision the binary was built from (12 characters,
// "+dirty" when the tree had changes), or "" when Go did not record one
// (go run, or a build outside a checkout).
func Commit() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}

// String is "<name> <version> (commit <rev>, <go release>, <os>/<arch>)".
func String(name string) string {
	c := Commit()
	if c == "" {
		c = "unknown"
	}
	return fmt.Sprintf("%s %s (commit %s, %s, %s/%s)", name, api.Version, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
