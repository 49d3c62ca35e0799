package intproxy

import (
	"fmt"
	"strings"

	"github.com/lanes-qos/lanes/intnw"
	"github.com/lanes-qos/lanes/lane"
)

// LabelOf is the label of a lane's streams, from what the lane's network
// settings say it is for: a lane that uses only idle capacity (idletime)
// or the background congestion control is background large; the lane
// served first (net priority 0, interactive) foreground small; any other
// foreground large.
func LabelOf(l *lane.Lane) intnw.Label {
	switch {
	case l.Net.Idletime || l.Net.CC == lane.CCLedbat:
		return intnw.BGLarge
	case l.Net.Priority == 0:
		return intnw.FGSmall
	}
	return intnw.FGLarge
}

// Labels is the label of every lane of cfg (LabelOf), then the overrides
// ("LANE=LABEL", e.g. "sync=bg-small"), which must name lanes of cfg.
func Labels(cfg *lane.Config, overrides []string) (map[string]intnw.Label, error) {
	out := map[string]intnw.Label{}
	for name, l := range cfg.Lanes {
		out[name] = LabelOf(l)
	}
	for _, o := range overrides {
		name, label, ok := strings.Cut(o, "=")
		if !ok {
			return nil, fmt.Errorf("label %q: want LANE=LABEL (e.g. sync=bg-large)", o)
		}
		name = strings.TrimSpace(name)
		if _, ok := cfg.Lanes[name]; !ok {
			return nil, fmt.Errorf("label %q: no lane %q in %s (lanes: %s)", o, name, cfg.Source, strings.Join(cfg.Order, ", "))
		}
		l, err := intnw.ParseLabel(label)
		if err != nil {
			return nil, fmt.Errorf("label %q: %w", o, err)
		}
		out[name] = l
	}
	return out, nil
}
