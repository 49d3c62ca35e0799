package hotspot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/testbed/linkem"
)

// Arm is one boosting setting of the transfer's lane.
type Arm struct {
	Name string
	// Boost is the [lanes.sync.boost] table ("" for none).
	Boost       string
	Description string
	// Beyond marks an arm beyond the seed's policies: run only when
	// named.
	Beyond bool
}

// Arms are no boosting and one policy of each family: the seed's INCR
// (nice -1 to -20, a step per event) and DECR (-20 to -1, a step per
// 60 KB), and a static boost at -20; and, run only when named, INCR with
// a short EEVDF slice and the three families boosting a process started
// in a contact from its start.
var Arms = []Arm{
	{"none", "", "no boosting (the seed's Original)", false},
	{"static", "policy = \"static\"\ninitial = -20\n", "static: nice -20 for the contact", false},
	{"incr", "policy = \"incr\"\ninitial = -1\nfinal = -20\nstep = \"events\"\nevery = 1\n", "INCR: nice -1, one level more per event, to -20 (the seed's)", false},
	{"decr", "policy = \"decr\"\ninitial = -20\nfinal = -1\nstep = \"bytes\"\nevery = 60000\n", "DECR: nice -20, one level less per 60 KB, to -1 (the seed's)", false},
	{"incr-slice", "policy = \"incr\"\ninitial = -1\nfinal = -20\nstep = \"events\"\nevery = 1\nslice = \"100us\"\n",
		"INCR with a 100 µs EEVDF slice for the boosted threads (beyond the seed: Linux 6.12 custom slices)", true},
	{"static-start", "policy = \"static\"\ninitial = -20\nfrom = \"start\"\n",
		"static -20, and a process started in the contact or the down period before it from its start (beyond the seed: from = \"start\")", true},
	{"incr-start", "policy = \"incr\"\ninitial = -1\nfinal = -20\nstep = \"events\"\nevery = 1\nfrom = \"start\"\n",
		"INCR, and a process started in the contact or the down period before it from its start (beyond the seed: from = \"start\")", true},
	{"decr-start", "policy = \"decr\"\ninitial = -20\nfinal = -1\nstep = \"bytes\"\nevery = 60000\nfrom = \"start\"\n",
		"DECR, and a process started in the contact or the down period before it from its start (beyond the seed: from = \"start\")", true},
}

// armNames lists the arms for errors and help.
func armNames() string {
	names := make([]string, len(Arms))
	for i, a := range Arms {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

func armByName(name string) (Arm, bool) {
	for _, a := range Arms {
		if a.Name == name {
			return a, true
		}
	}
	return Arm{}, false
}

// Options of a run.
type Options struct {
	OutDir  string
	Arms    []string // default all
	Hogs    []int    // default 0, 1, 10, 20, 30
	Repeats int      // default 1
	Size    int64    // bytes; default 41 MB
	Rate    uint64   // bit/s; default 10 Mbit/s
	Delay   time.Duration
	MeanOn  time.Duration // default 5s
	MeanOff time.Duration // default 5s
	CapPct  float64       // the lane's cap, percent of one CPU; default 5
	// CapPeriod is the period the cap is enforced in (the lane's
	// cpu.cap_period; 0: the kernel's 100 ms).
	CapPeriod time.Duration
	// SlowCPU, if set, emulates the seed's slowed CPU instead of the
	// cap: a real-time thread pinned to CPU 0 spins for all but SlowCPU
	// percent of every millisecond, so that what CPU 0 has left for the
	// sender and the hogs comes evenly, as from a clocked-down CPU, and
	// the lane has no cap.
	SlowCPU float64
	Seed    uint64 // the on/off schedule of repeat i is seeded Seed+i
	// StartUp starts the sender only while the link is up (in every
	// arm; where a boost listens, once lanesd has the contact): a
	// program launched when the network appears. Without it the sender
	// starts wherever the schedule is.
	StartUp bool
	// Audio runs the seed's audio experiment instead of the transfer:
	// the send jitter of 80-byte datagrams every 20 ms for AudioDuration
	// (default 30s) beside cross traffic of each Cross percent of the
	// link (default 0, 50, 85), with Hogs (default 0 and 1).
	Audio         bool
	AudioDuration time.Duration
	Cross         []int
	LanesBin      string
	LanesdBin     string
	Progress      io.Writer
	Logf          func(string, ...any)
}

func (o *Options) defaults() error {
	if len(o.Arms) == 0 {
		for _, a := range Arms {
			if !a.Beyond {
				o.Arms = append(o.Arms, a.Name)
			}
		}
	}
	for _, n := range o.Arms {
		if _, ok := armByName(n); !ok {
			return fmt.Errorf("unknown arm %q (arms: %s)", n, armNames())
		}
	}
	if len(o.Hogs) == 0 {
		o.Hogs = []int{0, 1, 10, 20, 30}
		if o.Audio {
			o.Hogs = []int{0, 1}
		}
	}
	if o.AudioDuration == 0 {
		o.AudioDuration = 30 * time.Second
	}
	if len(o.Cross) == 0 {
		o.Cross = []int{0, 50, 85}
	}
	for _, c := range o.Cross {
		if c < 0 || c > 100 {
			return fmt.Errorf("cross traffic %d%% outside 0..100", c)
		}
	}
	for _, h := range o.Hogs {
		if h < 0 || h > 256 {
			return fmt.Errorf("hogs %d outside 0..256", h)
		}
	}
	if o.Repeats == 0 {
		o.Repeats = 1
	}
	if o.Size == 0 {
		o.Size = 41_000_000
	}
	if o.Rate == 0 {
		o.Rate = 10_000_000
	}
	if o.Delay == 0 {
		o.Delay = 5 * time.Millisecond
	}
	if o.MeanOn == 0 {
		o.MeanOn = 5 * time.Second
	}
	if o.MeanOff == 0 {
		o.MeanOff = 5 * time.Second
	}
	if o.CapPct == 0 {
		o.CapPct = 5
	}
	if o.Seed == 0 {
		o.Seed = 2006
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	switch {
	case o.Repeats < 0:
		return fmt.Errorf("repeats %d is negative", o.Repeats)
	case o.Size < 0:
		return fmt.Errorf("size %d is negative", o.Size)
	case !(o.CapPct > 0 && o.CapPct <= 100):
		return fmt.Errorf("cap %g%% outside (0, 100]", o.CapPct)
	case o.SlowCPU != 0 && !(o.SlowCPU >= 5 && o.SlowCPU <= 95):
		return fmt.Errorf("slow CPU %g%% outside 5..95 (the kernel keeps 5%% of each CPU from real-time threads)", o.SlowCPU)
	case o.SlowCPU != 0 && o.CapPeriod != 0:
		return errors.New("a cap period with a slow CPU: the slow CPU replaces the cap")
	case o.CapPeriod != 0 && (o.CapPeriod < lane.MinCapPeriod || o.CapPeriod > lane.MaxCapPeriod):
		return fmt.Errorf("cap period %v outside %v..%v", o.CapPeriod, lane.MinCapPeriod, lane.MaxCapPeriod)
	}
	// CapPct is of one CPU: the lane's check on one CPU.
	if err := lane.CheckCapPeriod(lane.CPU{CapPercent: o.CapPct, CapPeriod: o.CapPeriod}, 1); err != nil {
		return fmt.Errorf("cap period: %w", err)
	}
	return nil
}

// Run is one transfer.
type Run struct {
	Arm    string  `json:"arm"`
	Hogs   int     `json:"hogs"`
	Repeat int     `json:"repeat"`
	Secs   float64 `json:"seconds,omitempty"` // transfer time
	// UpSecs is how much of the transfer time the link was up: the time
	// less the off periods it waited out, which the on/off schedule,
	// not the CPU, decides.
	UpSecs float64 `json:"up_seconds,omitempty"`
	// FirstByteSecs is when the server received the first byte of the
	// payload: the sender's start, connection and TLS handshake, which
	// come before it communicates (and so before a boost can reach it).
	// UpAfterFirstSecs is the link's up time from then to the end.
	FirstByteSecs    float64 `json:"first_byte_seconds,omitempty"`
	UpAfterFirstSecs float64 `json:"up_after_first_byte_seconds,omitempty"`
	Bytes            int64   `json:"bytes,omitempty"` // what the server received
	// Cross is the audio run's cross traffic, percent of the link;
	// JitterUS its send jitter in microseconds.
	Cross    *int    `json:"cross,omitempty"`
	JitterUS float64 `json:"jitter_us,omitempty"`
	// Contacts is how many contacts the oracle reported during the
	// transfer; Boosts how many boost events lanesd logged.
	Contacts int    `json:"contacts"`
	Error    string `json:"error,omitempty"`
}

// Results of a whole experiment.
type Results struct {
	Started time.Time `json:"started"`
	Host    string    `json:"host"`
	Setup   string    `json:"setup"`
	Runs    []Run     `json:"runs"`
}

// Paper is seed 000's Table (bulk transfer time mean/sd in seconds, with
// 0, 1, 10, 20 and 30 CPU hogs).
var Paper = map[string][5][2]float64{
	"none": {{80.8, 0.63}, {81, 0.82}, {81, 0.82}, {82.4, 2.55}, {82.7, 2.54}},
	"incr": {{80, 0}, {80.1, 0.32}, {80.1, 0.32}, {80.1, 0.32}, {80.2, 0.42}},
	"decr": {{80.4, 0.52}, {80.4, 0.52}, {80.8, 0.79}, {81.2, 0.92}, {81.7, 2.26}},
}

var paperHogs = []int{0, 1, 10, 20, 30}

// upMarkdown is a table of one measure of the transfers (an up time, the
// time to the first byte): its mean/sd at the fewest and most hogs, and
// their ratio in each repeat (the same schedule).
func (r *Results) upMarkdown(b *strings.Builder, arms []string, hogs []int, title string, measure func(Run) float64) {
	up := func(arm string, hogs, rep int) (float64, bool) {
		for _, run := range r.Runs {
			if run.Arm == arm && run.Hogs == hogs && run.Repeat == rep && run.Error == "" && measure(run) > 0 {
				return measure(run), true
			}
		}
		return 0, false
	}
	reps := 0
	for _, run := range r.Runs {
		reps = max(reps, run.Repeat+1)
	}
	if len(hogs) < 2 || reps == 0 {
		return
	}
	lo, hi := hogs[0], hogs[len(hogs)-1]
	fmt.Fprintf(b, "\n%s\n\n", title)
	fmt.Fprintf(b, "| arm | %d hogs | %d hogs | %d / %d hogs, per repeat | mean |\n|---|---|---|---|---|\n", lo, hi, hi, lo)
	for _, a := range arms {
		var xl, xh, ratios []float64
		var per []string
		for rep := range reps {
			l, okl := up(a, lo, rep)
			h, okh := up(a, hi, rep)
			if okl {
				xl = append(xl, l)
			}
			if okh {
				xh = append(xh, h)
			}
			if okl && okh {
				ratios = append(ratios, h/l)
				per = append(per, fmt.Sprintf("%.2f", h/l))
			}
		}
		if len(ratios) == 0 {
			fmt.Fprintf(b, "| %s | - | - | - | - |\n", a)
			continue
		}
		ml, sl := meanSD(xl)
		mh, sh := meanSD(xh)
		mr, _ := meanSD(ratios)
		fmt.Fprintf(b, "| %s | %.1f/%.1f s | %.1f/%.1f s | %s | %.2f |\n", a, ml, sl, mh, sh, strings.Join(per, ", "), mr)
	}
}

// stat is the mean and standard deviation of an arm's runs at a hog
// count (n = 0 when none succeeded).
func (r *Results) stat(arm string, hogs int) (mean, sd float64, n int) {
	var xs []float64
	for _, run := range r.Runs {
		if run.Arm == arm && run.Hogs == hogs && run.Error == "" {
			xs = append(xs, run.Secs)
		}
	}
	mean, sd = meanSD(xs)
	return mean, sd, len(xs)
}

// meanSD is the mean and sample standard deviation of xs (0 for fewer
// than two).
func meanSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

// PaperAudio is seed 000's audio table: send jitter in µs with 0 and 1
// hogs, at 0, 50 and 85 % cross traffic.
var PaperAudio = map[string][2][3]float64{
	"none": {{278, 268, 1066}, {847, 672, 575}},
	"incr": {{896, 1034, 1150}, {1132, 1147, 661}},
	"decr": {{433, 594, 1090}, {118, 1174, 549}},
}

var paperCross = []int{0, 50, 85}

// audioMarkdown is the audio runs' table: send jitter by arm and hogs
// (rows) and cross traffic (columns), the seed's beside.
func (r *Results) audioMarkdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Seed 000: audio send jitter under cross traffic and CPU hogs, boosting on contact\n\n%s\n\n%s\n\n", r.Host, r.Setup)
	type key struct {
		arm        string
		hogs, crss int
	}
	sum := map[key][]float64{}
	var arms []string
	var hogs, cross []int
	for _, run := range r.Runs {
		if run.Cross == nil {
			continue
		}
		if !slices.Contains(arms, run.Arm) {
			arms = append(arms, run.Arm)
		}
		if !slices.Contains(hogs, run.Hogs) {
			hogs = append(hogs, run.Hogs)
		}
		if !slices.Contains(cross, *run.Cross) {
			cross = append(cross, *run.Cross)
		}
		if run.Error == "" {
			k := key{run.Arm, run.Hogs, *run.Cross}
			sum[k] = append(sum[k], run.JitterUS)
		}
	}
	slices.Sort(hogs)
	slices.Sort(cross)
	b.WriteString("| arm | hogs |")
	for _, c := range cross {
		fmt.Fprintf(&b, " %d %% cross: lanes (seed) µs |", c)
	}
	b.WriteString("\n|---|---|")
	for range cross {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, a := range arms {
		for _, h := range hogs {
			fmt.Fprintf(&b, "| %s | %d |", a, h)
			for _, c := range cross {
				xs := sum[key{a, h, c}]
				cell := "failed"
				if len(xs) > 0 {
					m, _ := meanSD(xs)
					cell = fmt.Sprintf("%.0f", m)
				}
				if p, ok := PaperAudio[a]; ok && h <= 1 {
					if i := slices.Index(paperCross, c); i >= 0 {
						cell += fmt.Sprintf(" (%.0f)", p[h][i])
					}
				}
				fmt.Fprintf(&b, " %s |", cell)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nmean over the repeats; the seed's figure in parentheses (its Original is lanes' none).\n")
	return b.String()
}

// Markdown is the results table: each arm's transfer times by hog count,
// the seed's beside them, and the ratio of the most hogs to none (the
// goal: at most 1.15 for a boosting arm).
func (r *Results) Markdown() string {
	for _, run := range r.Runs {
		if run.Cross != nil {
			return r.audioMarkdown()
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Seed 000: bulk transfer time under CPU hogs, boosting on contact\n\n%s\n\n%s\n\n", r.Host, r.Setup)
	var arms []string
	hogSet := map[int]bool{}
	for _, run := range r.Runs {
		if !slices.Contains(arms, run.Arm) {
			arms = append(arms, run.Arm)
		}
		hogSet[run.Hogs] = true
	}
	var hogs []int
	for h := range hogSet {
		hogs = append(hogs, h)
	}
	slices.Sort(hogs)
	b.WriteString("| arm |")
	for _, h := range hogs {
		fmt.Fprintf(&b, " %d hogs: lanes (seed) |", h)
	}
	b.WriteString(" most hogs / none |\n|---|")
	for range hogs {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	for _, a := range arms {
		fmt.Fprintf(&b, "| %s |", a)
		for _, h := range hogs {
			m, sd, n := r.stat(a, h)
			cell := "failed"
			if n > 0 {
				cell = fmt.Sprintf("%.1f/%.1f s", m, sd)
			}
			if p, ok := Paper[a]; ok {
				for i, ph := range paperHogs {
					if ph == h {
						cell += fmt.Sprintf(" (%.1f/%.2f)", p[i][0], p[i][1])
					}
				}
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		m0, _, n0 := r.stat(a, hogs[0])
		mN, _, nN := r.stat(a, hogs[len(hogs)-1])
		if n0 > 0 && nN > 0 && m0 > 0 {
			fmt.Fprintf(&b, " %.2f |\n", mN/m0)
		} else {
			b.WriteString(" - |\n")
		}
	}
	b.WriteString("\nmean/sd over the repeats; the seed's mean/sd in parentheses (its Original is lanes' none).\n")
	r.upMarkdown(&b, arms, hogs, "The link's up time during the transfer (its time less the off periods waited out):",
		func(run Run) float64 { return run.UpSecs })
	r.upMarkdown(&b, arms, hogs, "The time to the first byte the server received (the sender's start, TCP and TLS handshakes; no boost before it communicates, but in the start arms one that starts in a contact, or while the link is down before one, is boosted from its start (or the contact's)):",
		func(run Run) float64 { return run.FirstByteSecs })
	r.upMarkdown(&b, arms, hogs, "The link's up time from the first byte to the end (the part a boost acts on):",
		func(run Run) float64 { return run.UpAfterFirstSecs })
	for _, run := range r.Runs {
		if run.Error != "" {
			fmt.Fprintf(&b, "\nERROR %s, %d hogs, repeat %d: %s\n", run.Arm, run.Hogs, run.Repeat, run.Error)
		}
	}
	return b.String()
}

// Write puts hotspot.json and hotspot.md (audio runs: audio.json and
// audio.md) into dir.
func (r *Results) Write(dir string) error {
	name := "hotspot"
	for _, run := range r.Runs {
		if run.Cross != nil {
			name = "audio"
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), j, 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(r.Markdown()), 0o644)
}

// UpTime is how long the link of sched is up between from and to (times
// from the schedule's start).
func UpTime(sched interface {
	NextUp(time.Duration) time.Duration
	DownIntervals() []linkem.Interval
}, from, to time.Duration) time.Duration {
	if to <= from {
		return 0
	}
	sched.NextUp(to) // the schedule drawn past to
	up := to - from
	for _, iv := range sched.DownIntervals() {
		lo, hi := max(iv.Start, from), min(iv.End, to)
		if hi > lo {
			up -= hi - lo
		}
	}
	return up
}
