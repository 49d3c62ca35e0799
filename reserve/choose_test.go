package reserve

import (
	"errors"
	"strings"
	"testing"
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
