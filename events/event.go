package events

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Event is one event on a channel.
type Event struct {
	// Seq is the bus's sequence number, set by Publish (1, 2, ...): the
	// order in which events were published on this bus.
	Seq uint64 `json:"seq"`
	// Time is when the event happened (Publish sets it when zero).
	Time time.Time `json:"time"`
	// Source says who published it: "monitor/proc", "netsched",
	// "controller/video", "app/1234", "host/NAME/..." for a bridge's.
	Source string `json:"source"`
	// Topic is what the event is about, dot-separated tokens.
	Topic string `json:"topic"`
	// Deadline, when set, is the time after which the event is no use to
	// anyone: a subscriber that has not taken it by then never sees it.
	Deadline time.Time `json:"deadline,omitzero"`
	// Payload holds the event's values by name. Values are bool, int64,
	// uint64, float64, string, or nested []any and map[string]any of those
	// (what JSON decodes to, with numbers as float64, is accepted too).
	Payload map[string]any `json:"payload,omitempty"`
}

func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s %s", e.Seq, e.Time.Format(time.RFC3339Nano), e.Source, e.Topic)
	if !e.Deadline.IsZero() {
		fmt.Fprintf(&b, " deadline=%s", e.Deadline.Format(time.RFC3339Nano))
	}
	for _, k := range sortedKeys(e.Payload) {
		fmt.Fprintf(&b, " %s=%v", k, e.Payload[k])
	}
	return b.String()
}

// Limits on events that come from outside the daemon (applications, other
// hosts): ValidateEvent enforces them.
const (
	MaxTopicLen     = 256
	MaxSourceLen    = 256
	MaxPayloadKeys  = 64
	MaxPayloadDepth = 4
	MaxStringLen    = 4096
)

// ValidateEvent checks an event that came from outside (an application's
// report, a bridge): a valid topic, a source, a payload of the allowed
// types within the limits, finite numbers. Nothing is changed.
func ValidateEvent(e *Event) error {
	if err := ValidateTopic(e.Topic); err != nil {
		return err
	}
	if e.Source == "" {
		return errors.New("event has no source")
	}
	if len(e.Source) > MaxSourceLen {
		return fmt.Errorf("event source is %d bytes, more than %d", len(e.Source), MaxSourceLen)
	}
	if len(e.Payload) > MaxPayloadKeys {
		return fmt.Errorf("payload has %d keys, more than %d", len(e.Payload), MaxPayloadKeys)
	}
	for k, v := range e.Payload {
		if err := validateValue(v, 1); err != nil {
			return fmt.Errorf("payload %q: %w", k, err)
		}
	}
	return nil
}

func validateValue(v any, depth int) error {
	if depth > MaxPayloadDepth {
		return fmt.Errorf("nested more than %d deep", MaxPayloadDepth)
	}
	switch x := v.(type) {
	case bool, int64, uint64, nil:
		return nil
	case int:
		return nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%v is not a finite number", x)
		}
		return nil
	case string:
		if len(x) > MaxStringLen {
			return fmt.Errorf("string of %d bytes, more than %d", len(x), MaxStringLen)
		}
		return nil
	case []any:
		if len(x) > MaxPayloadKeys {
			return fmt.Errorf("list of %d values, more than %d", len(x), MaxPayloadKeys)
		}
		for i, y := range x {
			if err := validateValue(y, depth+1); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	case map[string]any:
		if len(x) > MaxPayloadKeys {
			return fmt.Errorf("map of %d keys, more than %d", len(x), MaxPayloadKeys)
		}
		for k, y := range x {
			if err := validateValue(y, depth+1); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		}
		return nil
	default:
		return fmt.Errorf("value of type %T is not allowed (bool, number, string, list, map)", v)
	}
}

// Number returns a payload value as a float64, whatever its numeric type.
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case int:
		return float64(x), true
	case float32:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint32:
		return float64(x), true
	}
	return 0, false
}
