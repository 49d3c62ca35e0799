package systemd

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// weightIdle is the CPUWeight that systemd (252 and later) writes as
// cpu.idle = 1 ("CPUWeight=idle" in a unit file).
const weightIdle = 0

// infinity is systemd's USEC_INFINITY: no CPU quota.
const infinity = math.MaxUint64

// Properties turns the value lanes writes to a cgroup v2 file into the
// unit properties through which systemd writes that file itself. ok is
// false for a file systemd has no property for (lanes writes those
// directly, as systemd allows for settings it does not manage) and for
// cpu.idle = 0 (the weight written after it says what the unit's weight
// is). An error says the value is not one lanes writes.
func Properties(file, value string) (props []sddbus.Property, ok bool, err error) {
	f := strings.Fields(value)
	bad := func() ([]sddbus.Property, bool, error) {
		return nil, false, fmt.Errorf("%s: value %q has no systemd property", file, value)
	}
	u64 := func(name string, v uint64) sddbus.Property {
		return sddbus.Property{Name: name, Value: godbus.MakeVariant(v)}
	}
	switch file {
	case "cpu.weight":
		if len(f) != 1 {
			return bad()
		}
		w, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || w < 1 || w > 10000 {
			return bad()
		}
		return []sddbus.Property{u64("CPUWeight", w)}, true, nil
	case "cpu.idle":
		switch value {
		case "1":
			return []sddbus.Property{u64("CPUWeight", weightIdle)}, true, nil
		case "0":
			return nil, false, nil
		}
		return bad()
	case "cpu.max":
		if len(f) != 2 {
			return bad()
		}
		period, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || period == 0 {
			return bad()
		}
		perSec := uint64(infinity)
		if f[0] != "max" {
			q, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				return bad()
			}
			perSec = q * 1_000_000 / period
		}
		return []sddbus.Property{u64("CPUQuotaPerSecUSec", perSec), u64("CPUQuotaPeriodUSec", period)}, true, nil
	case "io.weight":
		// "default N", or "N" as lanes writes it.
		s := value
		if len(f) == 2 && f[0] == "default" {
			s = f[1]
		} else if len(f) != 1 {
			return bad()
		}
		w, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil || w < 1 || w > 10000 {
			return bad()
		}
		return []sddbus.Property{u64("IOWeight", w)}, true, nil
	}
	return nil, false, nil
}
