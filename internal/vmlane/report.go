package vmlane

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// failOutputLines is how many of a failed test's last output lines
// WriteText shows: the guest is gone after the run, and its log with it.
const failOutputLines = 80

// WriteText writes a plain report of every kernel's results: failures
// first (with the end of each failed test's output), then each skip with
// its check.
func WriteText(w io.Writer, runs []*KernelRun) {
	for _, r := range runs {
		fmt.Fprintf(w, "== %s (%s, %s): %s\n", r.Kernel, r.Release, r.Source, r.Summary())
		for _, f := range r.Failures {
			fmt.Fprintf(w, "   FAIL %s\n", f)
		}
		for _, p := range r.Packages {
			for _, t := range p.Tests {
				if t.Outcome != Fail || len(t.Output) == 0 {
					continue
				}
				out := t.Output[max(0, len(t.Output)-failOutputLines):]
				fmt.Fprintf(w, "   --- output of %s %s (last %d lines):\n", p.Package, t.Name, len(out))
				for _, l := range out {
					fmt.Fprintf(w, "   | %s\n", l)
				}
			}
		}
		for _, k := range sortedKeys(r.Checks) {
			c := r.Checks[k]
			reason := skipReason(r, k)
			if c.Verdict != NotFeatureSkip {
				reason += " [" + string(c.Verdict) + ": " + c.Detail + "]"
			}
			fmt.Fprintf(w, "   skip %s: %s\n", k, reason)
		}
	}
}

func skipReason(r *KernelRun, key string) string {
	for _, p := range r.Packages {
		for _, t := range p.Tests {
			if p.Package+" "+t.Name == key {
				return t.Reason
			}
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// WriteMarkdown writes the matrix as Markdown for docs/KERNELS.md: the
// kernels, per-package pass/skip/fail counts, the skips with their
// checks, `lanes doctor` per kernel and the timings.
func WriteMarkdown(w io.Writer, runs []*KernelRun) {
	fmt.Fprintln(w, "| kernel | release | from | passed | skipped | failed | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range runs {
		p, s, f := r.Counts()
		verdict := "pass"
		if len(r.Failures) > 0 {
			verdict = fmt.Sprintf("**fail** (%d)", len(r.Failures))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %d | %s |\n", r.Kernel, r.Release, r.Source, p, s, f, verdict)
	}
	fmt.Fprintln(w)

	fmt.Fprint(w, "| mechanism (`lanes doctor`) |")
	for _, r := range runs {
		fmt.Fprintf(w, " %s |", r.Kernel)
	}
	fmt.Fprint(w, "\n|---|")
	for range runs {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	var resources []string
	seenRes := map[string]bool{}
	for _, r := range runs {
		for _, m := range r.Mechs {
			if !seenRes[m.Resource] {
				seenRes[m.Resource] = true
				resources = append(resources, m.Resource)
			}
		}
	}
	for _, res := range resources {
		fmt.Fprintf(w, "| %s |", res)
		for _, r := range runs {
			cell := "–"
			for _, m := range r.Mechs {
				if m.Resource == res {
					cell = mdCell(m.cell())
				}
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
	if len(resources) == 0 {
		fmt.Fprintln(w, "| (lanes doctor --json gave nothing) | |")
	}
	fmt.Fprintln(w)

	pkgs := map[string]bool{}
	for _, r := range runs {
		for _, p := range r.Packages {
			pkgs[p.Package] = true
		}
	}
	fmt.Fprint(w, "| package (passed/skipped/failed) |")
	for _, r := range runs {
		fmt.Fprintf(w, " %s |", r.Kernel)
	}
	fmt.Fprint(w, "\n|---|")
	for range runs {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, pkg := range sortedKeys(pkgs) {
		fmt.Fprintf(w, "| %s |", pkg)
		for _, r := range runs {
			cell := "–"
			for _, p := range r.Packages {
				if p.Package != pkg {
					continue
				}
				var n [3]int
				for _, t := range p.Tests {
					switch t.Outcome {
					case Pass:
						n[0]++
					case Skip:
						n[1]++
					case Fail:
						n[2]++
					}
				}
				cell = fmt.Sprintf("%d/%d/%d", n[0], n[1], n[2])
				if p.ExitCode != 0 {
					cell += fmt.Sprintf(" (exit %d)", p.ExitCode)
				}
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "Skips, and what the kernel's config says about them:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| kernel | test | reason | check |")
	fmt.Fprintln(w, "|---|---|---|---|")
	any := false
	for _, r := range runs {
		for _, k := range sortedKeys(r.Checks) {
			c := r.Checks[k]
			check := "not a feature skip"
			if c.Verdict != NotFeatureSkip {
				check = string(c.Verdict) + ": " + c.Detail
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.Kernel, k, mdCell(skipReason(r, k)), mdCell(check))
			any = true
		}
	}
	if !any {
		fmt.Fprintln(w, "| – | no test skipped | | |")
	}
	fmt.Fprintln(w)

	for _, r := range runs {
		fmt.Fprintf(w, "#### `lanes doctor` on %s (%s)\n\n", r.Kernel, r.Release)
		if r.Doctor == nil {
			fmt.Fprintln(w, "not run: ./cmd/lanes did not exist or did not build")
		} else {
			fmt.Fprintf(w, "exit status %d\n\n```\n%s\n```\n", r.DoctorRC, strings.TrimRight(strings.Join(r.Doctor, "\n"), "\n"))
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w, "Modules and guest facts:")
	fmt.Fprintln(w)
	for _, r := range runs {
		if r.Kernel == "host" {
			fmt.Fprintf(w, "- host: cgroup v2 controllers: %s\n", strings.Join(r.Facts.Controllers, " "))
			continue
		}
		sd := ""
		if v := r.Info["systemd"]; v != "" { // the systemd column
			sd = fmt.Sprintf("; PID 1 %s (%s), root subtree_control: %s", r.Info["pid1"], v, r.Info["subtree_control"])
		}
		fmt.Fprintf(w, "- %s: loaded %s; built in %s; absent %s; cgroup v2 controllers: %s%s; sched_ext: %s; guest memory used %s kB\n",
			r.Kernel, list(r.Modules.Loaded), list(r.Modules.Builtin), list(r.Modules.Missing),
			r.Info["controllers"], sd, r.Info["sched_ext"], r.Info["mem-used-kb"])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Timings (seconds of wall time):")
	fmt.Fprintln(w)
	for _, r := range runs {
		var parts []string
		for _, t := range r.Timings {
			parts = append(parts, fmt.Sprintf("%s %.1f", t.Step, t.Seconds))
		}
		fmt.Fprintf(w, "- %s: %s\n", r.Kernel, strings.Join(parts, ", "))
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

func mdCell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}
