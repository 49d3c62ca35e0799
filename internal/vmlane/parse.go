package vmlane

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Outcome is the result of one test: "pass", "fail" or "skip".
type Outcome string

// The outcomes of a test.
const (
	Pass Outcome = "pass"
	Fail Outcome = "fail"
	Skip Outcome = "skip"
)

// TestResult is one test (or subtest) of one package on one kernel.
type TestResult struct {
	Name    string
	Outcome Outcome
	Reason  string   // for a skip or a fail: the message that says why
	Output  []string // the test's own output lines
}

// PackageResult is one test binary's run.
type PackageResult struct {
	Package  string // path relative to the module root, e.g. "netsched"
	ExitCode int    // the binary's exit status; -1 when it never reported one
	Tests    []TestResult
	Output   []string // every line the binary printed
}

// Console is what the guest's serial console said, split into its parts.
type Console struct {
	Info     map[string]string // VMLANE-INFO key value
	Packages []PackageResult
	Doctor   []string // output of `lanes doctor`, nil when it did not run
	DoctorRC int
	// DoctorJSON is the output of `lanes doctor --json`.
	DoctorJSON string
	// ResultRC is the guest's overall exit status from its
	// VMLANE-RESULT line; -1 when the line never came (the guest
	// panicked, hung or was killed).
	ResultRC int
	Lines    []string // the whole console, CR stripped, printk removed
}

// The markers the guest's init script prints around each part.
const (
	markInfo        = "VMLANE-INFO "
	markBegin       = "VMLANE-BEGIN "
	markEnd         = "VMLANE-END "
	markDoctorBegin = "VMLANE-DOCTOR-BEGIN"
	markDoctorEnd   = "VMLANE-DOCTOR-END "
	markResult      = "VMLANE-RESULT "
	markJSONBegin   = "VMLANE-DOCTORJSON-BEGIN"
	markJSONEnd     = "VMLANE-DOCTORJSON-END "
)

var (
	printkLine = regexp.MustCompile(`^\[\s*\d+\.\d+\] `)
	rcField    = regexp.MustCompile(`rc=(-?\d+)`)
)

// ParseConsole splits a guest console transcript into the runs of the
// test binaries, the doctor output and the overall result.
func ParseConsole(text string) Console {
	c := Console{Info: map[string]string{}, ResultRC: -1, DoctorRC: -1}
	var (
		pkg       string
		pkgLines  []string
		inPkg     bool
		inDoctor  bool
		doctorOut []string
		inJSON    bool
		jsonOut   []string
	)
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimRight(raw, "\r")
		if printkLine.MatchString(line) {
			continue
		}
		c.Lines = append(c.Lines, line)
		switch {
		case markerIn(line, markBegin) != "":
			rest := markerIn(line, markBegin)
			if inPkg { // the previous binary never ended: keep what it said
				c.Packages = append(c.Packages, ParseGoTest(pkg, pkgLines, -1))
			}
			pkg, pkgLines, inPkg = strings.TrimSpace(rest), nil, true
		case markerIn(line, markEnd) != "" && inPkg:
			c.Packages = append(c.Packages, ParseGoTest(pkg, pkgLines, rcOf(markerIn(line, markEnd))))
			inPkg = false
		case strings.Contains(line, markDoctorBegin):
			inDoctor, doctorOut = true, []string{}
		case markerIn(line, markDoctorEnd) != "" && inDoctor:
			c.Doctor, c.DoctorRC, inDoctor = doctorOut, rcOf(markerIn(line, markDoctorEnd)), false
		case strings.Contains(line, markJSONBegin):
			inJSON = true
		case markerIn(line, markJSONEnd) != "" && inJSON:
			c.DoctorJSON, inJSON = strings.Join(jsonOut, "\n"), false
		case inJSON:
			jsonOut = append(jsonOut, line)
		case markerIn(line, markResult) != "":
			c.ResultRC = rcOf(markerIn(line, markResult))
		case markerIn(line, markInfo) != "" && !inPkg:
			k, v, _ := strings.Cut(markerIn(line, markInfo), " ")
			if prev, ok := c.Info[k]; ok { // repeated keys accumulate
				v = prev + " " + v
			}
			c.Info[k] = strings.TrimSpace(v)
		case inPkg:
			pkgLines = append(pkgLines, line)
		case inDoctor:
			doctorOut = append(doctorOut, line)
		}
	}
	if inPkg {
		c.Packages = append(c.Packages, ParseGoTest(pkg, pkgLines, -1))
	}
	if inDoctor {
		c.Doctor = doctorOut
	}
	return c
}

// markerIn returns what follows marker in line, or "" when line has no
// such marker. Printk output can land at the start of a line, so the
// marker is searched for, not only matched as a prefix.
func markerIn(line, marker string) string {
	i := strings.Index(line, marker)
	if i < 0 {
		return ""
	}
	rest := line[i+len(marker):]
	if rest == "" {
		return " " // present but empty
	}
	return rest
}

func rcOf(s string) int {
	m := rcField.FindStringSubmatch(s)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}

var (
	runLine    = regexp.MustCompile(`^=== (RUN|PAUSE|CONT|NAME)\s+(\S+)`)
	resultLine = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+) \(`)
	logPrefix  = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)
)

// ParseGoTest reads the -test.v output of one test binary: the
// "=== RUN", "=== CONT", "=== NAME" and "--- PASS/FAIL/SKIP" lines, with
// the output in between attributed to the test that was running. A test
// that started but never reported a result is a failure.
func ParseGoTest(pkg string, lines []string, exitCode int) PackageResult {
	r := PackageResult{Package: pkg, ExitCode: exitCode, Output: lines}
	index := map[string]int{}
	get := func(name string) *TestResult {
		i, ok := index[name]
		if !ok {
			i = len(r.Tests)
			index[name] = i
			r.Tests = append(r.Tests, TestResult{Name: name})
		}
		return &r.Tests[i]
	}
	current := ""
	for _, line := range lines {
		if m := runLine.FindStringSubmatch(line); m != nil {
			get(m[2])
			current = m[2]
			continue
		}
		if m := resultLine.FindStringSubmatch(line); m != nil {
			t := get(m[3])
			t.Outcome = map[string]Outcome{"PASS": Pass, "FAIL": Fail, "SKIP": Skip}[m[2]]
			current = m[3]
			continue
		}
		if current != "" && line != "" && line != "PASS" && line != "FAIL" {
			t := get(current)
			t.Output = append(t.Output, line)
		}
	}
	for i := range r.Tests {
		t := &r.Tests[i]
		switch t.Outcome {
		case "":
			t.Outcome = Fail
			t.Reason = fmt.Sprintf("no result: the test binary ended (exit status %d) while it ran", exitCode)
		case Fail:
			t.Reason = failReasonOf(t.Output)
		case Skip:
			t.Reason = skipReasonOf(t.Output)
		}
	}
	for i := range r.Tests {
		t := &r.Tests[i]
		if t.Outcome != Fail || t.Reason != "" {
			continue
		}
		for _, sub := range r.Tests {
			if sub.Outcome == Fail && strings.HasPrefix(sub.Name, t.Name+"/") {
				t.Reason = "subtest " + sub.Name + " failed"
				break
			}
		}
	}
	return r
}

// reasonOf picks the line that says why a test skipped or failed: the
// missing-feature message when there is one, else the last log line.
func reasonOf(output []string) string {
	last := ""
	for _, l := range output {
		msg := strings.TrimSpace(logPrefix.ReplaceAllString(l, ""))
		if strings.Contains(msg, missingFeaturePrefix) {
			return msg
		}
		if msg != "" {
			last = msg
		}
	}
	return last
}

var testFileLine = regexp.MustCompile(`^\s*[\w.-]+_test\.go:\d+: `)

// skipReasonOf picks the skip message among a skipped test's lines:
// the testutil messages first, then the last line logged from a _test.go
// file (t.Skip reports its caller), then the last line. Cleanup code
// may log after the skip.
func skipReasonOf(output []string) string {
	for _, l := range output {
		msg := strings.TrimSpace(logPrefix.ReplaceAllString(l, ""))
		if strings.Contains(msg, missingFeaturePrefix) || strings.Contains(msg, "not made under emulation") {
			return msg
		}
	}
	return failReasonOf(output)
}

// failReasonOf picks the last line logged from a _test.go file (where
// t.Error, t.Fatal and t.Skip report, helpers included), else the last
// line: the enforcers' own log lines are not the reason.
func failReasonOf(output []string) string {
	for i := len(output) - 1; i >= 0; i-- {
		if testFileLine.MatchString(output[i]) {
			return strings.TrimSpace(logPrefix.ReplaceAllString(output[i], ""))
		}
	}
	return reasonOf(output)
}
