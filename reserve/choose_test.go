package reserve

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	refused := errors.New("operation not permitted")
	tests := []struct {
		name     string
		want     string
		f        Facts
		deadline bool
		why      string
		err      bool
	}{
		{"auto at 250 Hz without hrtick", MechAuto, Facts{Hz: 250, HRTickKnown: true}, false, "enforced at the 4ms tick (CONFIG_HZ=250, HRTICK_DL off): a 100 ms window would swing by 4% of a CPU", false},
		{"auto at 250 Hz, hrtick unreadable", "", Facts{Hz: 250}, false, "HRTICK_DL unreadable", false},
		{"auto at 1000 Hz without hrtick", MechAuto, Facts{Hz: 1000, HRTickKnown: true}, false, "enforced at the 1ms tick (CONFIG_HZ=1000, HRTICK_DL off)", false},
		{"auto with hrtick", MechAuto, Facts{Hz: 100, HRTick: true, HRTickKnown: true}, true, "HRTICK_DL", false},
		{"auto, unknown tick", MechAuto, Facts{}, false, "is unknown", false},
		{"auto, refused", MechAuto, Facts{Deadline: refused, HRTick: true, HRTickKnown: true}, false, "refused here: operation not permitted", false},
		{"deadline asked", MechDeadline, Facts{Hz: 250}, true, "asked for", false},
		{"deadline asked, refused", MechDeadline, Facts{Deadline: refused}, false, "asked for but refused", false},
		{"cfs asked", MechCFS, Facts{Hz: 1000}, false, "asked for", false},
		{"unknown", "edf", Facts{}, false, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dl, why, err := Choose(tt.want, tt.f)
			if (err != nil) != tt.err {
				t.Fatalf("Choose: error %v", err)
			}
			if dl != tt.deadline || !strings.Contains(why, tt.why) {
				t.Errorf("Choose = %v, %q; want %v, %q", dl, why, tt.deadline, tt.why)
			}
		})
	}
}

func TestAssist(t *testing.T) {
	tests := []struct {
		name  string
		want  string
		hz    int
		every time.Duration
		why   string
		err   bool
	}{
		{"auto at 250 Hz", AssistAuto, 250, time.Millisecond, "tick is 4ms (CONFIG_HZ=250), a swing of 4% of a CPU", false},
		{"default is auto", "", 100, time.Millisecond, "CONFIG_HZ=100", false},
		{"auto at 1000 Hz", AssistAuto, 1000, 0, "not needed: the kernel's 1ms tick", false},
		{"auto, unknown tick", AssistAuto, 0, time.Millisecond, "unknown", false},
		{"off", AssistOff, 250, 0, "off", false},
		{"a period", "500us", 1000, 500 * time.Microsecond, "asked for (lanesd --reserve-tick-assist 500us)", false},
		{"the shortest period", "100us", 250, 100 * time.Microsecond, "asked for", false},
		{"too short", "50us", 250, 0, "", true},
		{"too long", "20ms", 250, 0, "", true},
		{"not a period", "fast", 250, 0, "", true},
		{"no unit", "1", 250, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			every, why, err := Assist(tt.want, tt.hz)
			if (err != nil) != tt.err {
				t.Fatalf("Assist: error %v", err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "--reserve-tick-assist") && !strings.Contains(err.Error(), "tick assist") {
					t.Errorf("error %q does not name the setting", err)
				}
				return
			}
			if every != tt.every || !strings.Contains(why, tt.why) {
				t.Errorf("Assist = %v, %q; want %v, %q", every, why, tt.every, tt.why)
			}
		})
	}
}
