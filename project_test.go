// Checks on the project as a whole: package docs and dependency rules.
package lanes_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every package has exactly one package doc comment, in doc.go.
func TestPackageDocs(t *testing.T) {
	dirs := map[string]bool{}
	filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "clients") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	for dir := range dirs {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		for _, p := range pkgs {
			var withDoc []string
			for name, f := range p.Files {
				if f.Doc != nil && !strings.HasPrefix(f.Doc.Text(), "Code generated") {
					withDoc = append(withDoc, filepath.Base(name))
				}
			}
			switch {
			case len(withDoc) == 0:
				t.Errorf("no package doc in %s", dir)
			case len(withDoc) > 1:
				t.Errorf("several files with a package doc in %s: %v", dir, withDoc)
			case withDoc[0] != "doc.go" && p.Name != "main":
				t.Errorf("package doc of %s is in %s, want doc.go", dir, withDoc[0])
			}
		}
	}
}

// dep is a package a rule names, and why.
type dep struct{ path, why string }

const mod = "github.com/lanes-qos/lanes/"

// depRules say, per package, what it must not link (directly or through
// anything it imports) and why. For a binary, links is every package of
// this module it may link, with why: one it links that is not listed
// fails, so the list stays what the binary carries.
var depRules = []struct {
	pkg       string
	forbidden []dep
	links     []dep
}{
	{pkg: "./cmd/lanes",
		forbidden: []dep{
			{mod + "netsched", "network enforcement is lanesd's: `lanes doctor` asks lanesd (/v1/doctor) and probes with internal/netprobe when no daemon runs"},
			{mod + "bpf", "lanes' BPF objects are loaded by lanesd only (netsched, diskidle); linked, their bytecode and loaders would ride in the CLI"},
			{mod + "diskidle", "disk idletime loads BPF and holds devices: lanesd's"},
			{mod + "procwatch", "the BPF process events and placement check are lanesd's (enforce asks them through its Settler interface)"},
			{mod + "ledbat", "lanesd registers the background congestion control; `lanes doctor` probes for it with internal/netprobe"},
			{mod + "daemon", "the CLI is a client: it reaches lanesd through the local API"},
			{mod + "internal/vmlane", "the kernel matrix is lanes-vmlane's"},
			{mod + "bridge", "the NATS bridge runs in lanesd; the CLI sees its counters through /v1/status"},
			{"github.com/nats-io/nats-server/v2/server", "a NATS server is embedded in the bridge's tests only"},
		},
		links: []dep{
			{mod + "cmd/lanes/cli", "the lanes commands"},
			{mod + "cmd/lanes/benchcmd", "`lanes bench`"},
			{mod + "api", "the local API's types"},
			{mod + "api/client", "the local API's client: every command but config check and bench asks lanesd first"},
			{mod + "lane", "the config: `lanes config check`, and the lane a daemon-less `lanes run` applies"},
			{mod + "events", "through lane: `lanes config check` compiles the config's topic patterns and CEL filters as lanesd does"},
			{mod + "idletime", "the PI policy type the config holds (pure Go; the controller runs in lanesd only)"},
			{mod + "autorate", "the auto rate's law type the config holds (pure Go; the controller runs in lanesd only)"},
			{mod + "boost", "a lane's boost policy type the config holds and checks (pure Go; boosting runs in lanesd only)"},
			{mod + "reserve", "through lane: `lanes config check` runs the reservations' admission control as lanesd does (pure Go)"},
			{mod + "dwcs", "through lane: a reservation given as C/T x/y is DWCS's window budget (pure Go)"},
			{mod + "internal/hostcpu", "through lane: the host's online CPUs and real-time share that reservations are admitted against"},
			{"github.com/dustin/go-humanize", "through lane: a boost policy's every in bytes (\"60KB\", \"64KiB\")"},
			{mod + "control", "the [[controller]] types the config holds and their CEL handlers' check, so `lanes config check` refuses a bad one as lanesd does (pure Go; controllers run in lanesd only)"},
			{mod + "events", "through lane and control: compiling controllers' CEL filters and handlers in the events' environment (pure Go)"},
			{mod + "enforce", "daemon-less `lanes run`: without lanesd, root may still run a command in a lane; enforce.StartAlone applies the lane's CPU and disk settings to a private group for the command's life and undoes them, the one implementation of a move (a copy in the CLI would be a second owner of how a process joins a lane)"},
			{mod + "cpu", "through enforce: the lane's CPU settings (and their probe for `lanes doctor`)"},
			{mod + "disk", "through enforce: the lane's I/O priority and weight (and their probe)"},
			{mod + "monitor", "through enforce: the process tree a move takes along"},
			{mod + "state", "through enforce: a daemon-less run records what it changes (in paths.RunDir, tmpfs) before it changes it, like lanesd"},
			{mod + "internal/cgroup", "through enforce: the lane's groups; and the hierarchy `lanes doctor` reports"},
			{mod + "internal/systemd", "through enforce: where systemd owns the cgroup tree a daemon-less run's lane is a slice and scope made over D-Bus; and the placement `lanes doctor` reports"},
			{mod + "internal/procfs", "through enforce and monitor: /proc/PID fields"},
			{mod + "internal/paths", "the default config file a daemon-less run reads, and where it keeps its records"},
			{mod + "internal/rate", "the config's rates (through lane) and the testbed's link rates: one parser, tc's units"},
			{mod + "internal/features", "probe conventions and the Mechanism lines of `lanes doctor`"},
			{mod + "internal/buildinfo", "`lanes --version`: the commit and Go release of the build"},
			{mod + "internal/netprobe", "`lanes doctor` without a daemon: qdisc, IFB and u32 probes in throwaway namespaces, BPF program types, helpers and maps asked of the verifier (cilium/ebpf's features package, no lanes program), the default route link's offloads (ethtool)"},
			{mod + "bench", "`lanes bench`: the scenario runner"},
			{mod + "bench/ch5", "`lanes bench ch5`: seed 004's chapter-5 experiment, and `lanes bench ch5video`, the video application the runner re-executes"},
			{mod + "bench/hotspot", "`lanes bench hotspot`: seed 000's experiment (boosting on contact under CPU hogs)"},
			{mod + "bench/execspeed", "`lanes bench execspeed`: seed 001's experiments (rate by CPU share, reservations), and the sender it re-executes"},
			{mod + "bench/coord", "`lanes bench coord`: seed 004's coordinated CPU and packet scheduling experiment"},
			{mod + "pacer", "through bench/coord: the user-space DWCS packet pacer the experiment drives (pure Go but its clock)"},
			{mod + "internal/rtthread", "through pacer and bench/hotspot: the pacer's real-time thread, and the slow-CPU thief of `lanes bench hotspot --slow-cpu`"},
			{mod + "bench/multinet", "`lanes bench multinet`: seed 002's Intentional Networking evaluation"},
			{mod + "cmd/lanes/proxycmd", "`lanes proxy`, wired in by cmd/lanes so that cmd/lanes/cli links no network code"},
			{mod + "intnw", "`lanes proxy`'s multi-socket, and the one bench/multinet measures"},
			{mod + "internal/netnsrun", "through intnw and intproxy: a path, listener or destination in a given network namespace"},
			{mod + "intproxy", "`lanes proxy`: the client and server ends (SOCKS5, transparent, lane labels), and bench/multinet's proxy arm"},
			{"github.com/google/nftables", "through intproxy: `lanes proxy client --redirect` installs its redirect rules over netlink"},
			{mod + "testbed/netns", "`lanes bench`: the testbed's namespaces"},
			{mod + "testbed/linkem", "`lanes bench`: the link emulator"},
			{mod + "testbed/workload", "`lanes bench`: workloads, and `lanes bench gen`, the generator the runner re-executes"},
		},
	},
	{pkg: "./cmd/lanesd",
		forbidden: []dep{
			{mod + "cmd/lanes/cli", "the daemon does not carry its client's commands"},
			{mod + "bench", "benchmarks are `lanes bench`'s"},
			{mod + "bench/ch5", "benchmarks are `lanes bench`'s"},
			{mod + "bench/hotspot", "benchmarks are `lanes bench`'s"},
			{mod + "bench/execspeed", "benchmarks are `lanes bench`'s"},
			{mod + "bench/coord", "benchmarks are `lanes bench`'s"},
			{mod + "bench/multinet", "benchmarks are `lanes bench`'s"},
			{mod + "testbed/netns", "test harness: namespaces for tests and benchmarks"},
			{mod + "testbed/linkem", "test harness: the user-space link emulator"},
			{mod + "testbed/workload", "test harness: traffic and CPU workloads"},
			{mod + "internal/testutil", "test helpers"},
			{mod + "internal/vmlane", "the kernel matrix is lanes-vmlane's"},
			{"github.com/nats-io/nats-server/v2/server", "lanesd is a NATS client (bridge); the server is embedded in tests only"},
		},
	},
	{pkg: "./cmd/lanes-vmlane",
		forbidden: []dep{
			{mod + "daemon", "the matrix builds and boots test binaries; it enforces nothing on the host"},
			{mod + "enforce", "the matrix enforces nothing on the host"},
			{mod + "netsched", "the matrix enforces nothing on the host"},
			{mod + "bpf", "the matrix loads no BPF on the host"},
			{"github.com/cilium/ebpf", "the matrix loads no BPF on the host"},
			{"github.com/vishvananda/netlink", "the matrix changes no network settings on the host"},
		},
	},
	{pkg: "./cmd/lanes/cli",
		forbidden: []dep{
			{"github.com/vishvananda/netlink", "the CLI proper is a client; network probes are wired in by cmd/lanes (Options.LocalProbes)"},
			{"github.com/cilium/ebpf", "the CLI proper loads and probes no BPF; cmd/lanes wires in netprobe"},
			{mod + "netsched", "network enforcement is lanesd's"},
			{mod + "daemon", "the CLI is a client of lanesd"},
		},
	},
	{pkg: "./api", forbidden: apiForbidden},
	{pkg: "./api/client", forbidden: apiForbidden},
	{pkg: "./lane",
		forbidden: []dep{
			{"golang.org/x/sys/unix", "lane is pure: the model and its config, no kernel"},
			{"github.com/vishvananda/netlink", "lane is pure"},
			{"github.com/cilium/ebpf", "lane is pure"},
			{mod + "internal/cgroup", "lane is pure; enforcers turn its settings into cgroups"},
		},
	},
}

// apiForbidden: the API's types and client carry no kernel code, so that
// any program may talk to lanesd.
var apiForbidden = []dep{
	{"golang.org/x/sys/unix", "the API is wire types and HTTP only"},
	{"github.com/vishvananda/netlink", "the API is wire types and HTTP only"},
	{"github.com/cilium/ebpf", "the API is wire types and HTTP only"},
	{mod + "enforce", "the API describes enforcement; lanesd does it"},
}

// TestDependencyRules checks depRules, and that every binary under cmd/
// has a rule.
func TestDependencyRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain here (the dependency rules are checked where the code is built)")
	}
	ruled := map[string]bool{}
	for _, r := range depRules {
		ruled[r.pkg] = true
	}
	out, err := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", "./cmd/...").Output()
	if err != nil {
		t.Fatalf("go list ./cmd/...: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, path, _ := strings.Cut(line, " ")
		if rel := "./" + strings.TrimPrefix(path, mod); name == "main" && !ruled[rel] {
			t.Errorf("binary %s has no dependency rule: add one to depRules", rel)
		}
	}
	for _, r := range depRules {
		imports := depGraph(t, r.pkg)
		for _, f := range r.forbidden {
			if _, ok := imports[f.path]; ok {
				t.Errorf("%s links %s (via %s): %s", r.pkg, f.path, strings.Join(importChain(imports, r.pkg, f.path), " -> "), f.why)
			}
		}
		if r.links == nil {
			continue
		}
		listed := map[string]bool{}
		for _, f := range r.forbidden {
			listed[f.path] = true // reported above
		}
		for _, l := range r.links {
			listed[l.path] = true
		}
		for p := range imports {
			if strings.HasPrefix(p, mod) && !listed[p] && "./"+strings.TrimPrefix(p, mod) != r.pkg {
				t.Errorf("%s links %s (via %s), which its rule does not list: add it with the reason, or cut the import", r.pkg, p, strings.Join(importChain(imports, r.pkg, p), " -> "))
			}
		}
	}
}

// depGraph returns every package pkg links, with its imports.
func depGraph(t *testing.T, pkg string) map[string][]string {
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	g := map[string][]string{}
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		g[p.ImportPath] = p.Imports
	}
	return g
}

// importChain returns a shortest chain of imports from pkg to target.
func importChain(g map[string][]string, pkg, target string) []string {
	start := mod + strings.TrimPrefix(pkg, "./")
	prev := map[string]string{start: ""}
	queue := []string{start}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == target {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{strings.TrimPrefix(p, mod)}, chain...)
			}
			return chain
		}
		for _, q := range g[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return []string{"?"}
}
