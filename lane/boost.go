package lane

import (
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/lanes-qos/lanes/boost"
)

// fileBoost is a lane's [lane.NAME.boost] table: priority boosting of
// its communicating processes during a contact (seed 000).
type fileBoost struct {
	Policy  *string `toml:"policy"`
	Initial *int    `toml:"initial"`
	Final   *int    `toml:"final"`
	Step    *string `toml:"step"`
	Every   any     `toml:"every"`
	Clamp   *int    `toml:"clamp"`
	OnLeave *string `toml:"on_leave"`
	Slice   *string `toml:"slice"`
	From    *string `toml:"from"`
}

// boostDefaults are the seed's evaluated parameters: INCR from nice −1 by
// one level per event to −20, DECR from −20 by one level per 60 KB to
// −1; a static boost holds −10.
var boostDefaults = map[boost.Kind]boost.Policy{
	boost.Static: {Kind: boost.Static, Initial: -10},
	boost.Incr:   {Kind: boost.Incr, Initial: -1, Final: -20, Step: boost.Events, Every: 1},
	boost.Decr:   {Kind: boost.Decr, Initial: -20, Final: -1, Step: boost.Bytes, Every: 60000},
}

// boostPolicy validates a boost table; ok false when it had an error
// (recorded with its key).
func (v *validator) boostPolicy(key string, fb *fileBoost) (boost.Policy, bool) {
	if fb.Policy == nil {
		v.add(key+".policy", "missing: want static, incr, decr or none")
		return boost.Policy{}, false
	}
	if *fb.Policy == "none" {
		return boost.Policy{}, true
	}
	p, known := boostDefaults[boost.Kind(*fb.Policy)]
	if !known {
		v.add(key+".policy", "unknown policy %q (want static, incr, decr or none)", *fb.Policy)
		return boost.Policy{}, false
	}
	p.Clamp, p.OnLeave = boost.NiceMin, boost.Reset
	if fb.Initial != nil {
		p.Initial = *fb.Initial
	}
	if fb.Final != nil {
		p.Final = *fb.Final
	}
	if fb.Clamp != nil {
		p.Clamp = *fb.Clamp
	}
	if fb.OnLeave != nil {
		p.OnLeave = boost.Ending(*fb.OnLeave)
	}
	if fb.Slice != nil {
		d, err := time.ParseDuration(strings.TrimSpace(*fb.Slice))
		switch {
		case err != nil:
			v.add(key+".slice", "%q is not a duration (want e.g. \"100us\", or \"0s\" to keep the threads' slices)", *fb.Slice)
			return boost.Policy{}, false
		case d < 0:
			v.add(key+".slice", "%v is negative (want 100us..100ms, or \"0s\" to keep the threads' slices)", d)
			return boost.Policy{}, false
		}
		p.Slice = d
	}
	if fb.From != nil {
		p.From = boost.Source(*fb.From) // checked by p.Check below
	}
	if p.Kind == boost.Static && (fb.Final != nil || fb.Step != nil || fb.Every != nil) {
		v.add(key+".policy", "static holds one boost: final, step and every are for incr and decr")
		return boost.Policy{}, false
	}
	if fb.Step != nil {
		p.Step = boost.Unit(*fb.Step)
		switch p.Step {
		case boost.Events, boost.Time, boost.Bytes:
		default:
			v.add(key+".step", "unknown step %q (want events, time or bytes)", *fb.Step)
			return boost.Policy{}, false
		}
		if fb.Every == nil {
			v.add(key+".step", "step %q needs every: a number of events, a duration or a size", *fb.Step)
			return boost.Policy{}, false
		}
	}
	if fb.Every != nil {
		every, err := boostEvery(p.Step, fb.Every)
		if err != nil {
			v.add(key+".every", "%v", err)
			return boost.Policy{}, false
		}
		p.Every = every
	}
	if err := p.Check(); err != nil {
		// Check names the key it found wrong ("final: ...").
		sub, msg := splitKey(err.Error())
		v.add(key+"."+sub, "%s", msg)
		return boost.Policy{}, false
	}
	return p, true
}

// boostEvery reads every for the step's unit: a count of events, a
// duration, or a size in bytes ("60KB" is 60,000, "64KiB" 65,536).
func boostEvery(u boost.Unit, v any) (float64, error) {
	switch u {
	case boost.Events:
		n, ok := v.(int64)
		if !ok || n <= 0 {
			return 0, fmt.Errorf("%v: step \"events\" wants a positive whole number of events", v)
		}
		return float64(n), nil
	case boost.Time:
		s, ok := v.(string)
		if !ok {
			return 0, fmt.Errorf("%v: step \"time\" wants a duration such as \"500ms\"", v)
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q: step \"time\" wants a positive duration such as \"500ms\"", s)
		}
		return float64(d), nil
	case boost.Bytes:
		switch x := v.(type) {
		case int64:
			if x <= 0 {
				return 0, fmt.Errorf("%d: step \"bytes\" wants a positive size", x)
			}
			return float64(x), nil
		case string:
			n, err := humanize.ParseBytes(x)
			if err != nil || n == 0 {
				return 0, fmt.Errorf("%q: step \"bytes\" wants a positive size such as \"60KB\" or \"64KiB\"", x)
			}
			return float64(n), nil
		}
		return 0, fmt.Errorf("%v: step \"bytes\" wants a size such as \"60KB\"", v)
	}
	return 0, fmt.Errorf("unknown step %q (want events, time or bytes)", u)
}

// splitKey splits "key: message" as boost.Policy.Check words its errors.
func splitKey(s string) (key, msg string) {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == ':' && s[i+1] == ' ' {
			return s[:i], s[i+2:]
		}
	}
	return "policy", s
}
