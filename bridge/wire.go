package bridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/lanes-qos/lanes/events"
)

// SubjectPrefix is the first token of every subject the bridge uses.
const SubjectPrefix = "lanes"

// MaxMessage bounds an imported message's size.
const MaxMessage = 64 << 10

// wireEvent is an event on the wire: JSON, the topic carried by the
// subject. Sequence numbers are the publishing bus's and are not sent.
type wireEvent struct {
	Time     time.Time      `json:"time"`
	Source   string         `json:"source"`
	Deadline time.Time      `json:"deadline,omitzero"`
	Payload  map[string]any `json:"payload,omitempty"`
}

// Subject returns the NATS subject of host's topic.
func Subject(host, topic string) string {
	return SubjectPrefix + "." + host + "." + topic
}

// splitSubject returns the host and topic of a subject.
func splitSubject(subj string) (host, topic string, err error) {
	rest, ok := strings.CutPrefix(subj, SubjectPrefix+".")
	if !ok {
		return "", "", fmt.Errorf("subject %q does not begin %q", subj, SubjectPrefix+".")
	}
	host, topic, ok = strings.Cut(rest, ".")
	if !ok || host == "" {
		return "", "", fmt.Errorf("subject %q has no host and topic", subj)
	}
	return host, topic, nil
}

func encode(e *events.Event) ([]byte, error) {
	return json.Marshal(wireEvent{Time: e.Time, Source: e.Source, Deadline: e.Deadline, Payload: e.Payload})
}

// decode reads an event from host's subject: numbers that are integers
// come back as int64 (uint64 above its range), others as float64, so that
// a payload crosses the wire with the types events allow.
func decode(subj string, data []byte) (events.Event, string, error) {
	host, topic, err := splitSubject(subj)
	if err != nil {
		return events.Event{}, "", err
	}
	if len(data) > MaxMessage {
		return events.Event{}, host, fmt.Errorf("message of %d bytes, more than %d", len(data), MaxMessage)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var w wireEvent
	if err := dec.Decode(&w); err != nil {
		return events.Event{}, host, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return events.Event{}, host, errors.New("decode: data after the event")
	}
	if w.Source == "" {
		return events.Event{}, host, errors.New("event has no source")
	}
	p, err := numbers(w.Payload, 0)
	if err != nil {
		return events.Event{}, host, err
	}
	e := events.Event{Time: w.Time, Topic: topic, Deadline: w.Deadline, Source: "host/" + host + "/" + w.Source}
	if p != nil {
		e.Payload = p.(map[string]any)
	}
	return e, host, nil
}

// numbers replaces json.Number values by int64, uint64 or float64.
func numbers(v any, depth int) (any, error) {
	if depth > events.MaxPayloadDepth+1 {
		return nil, fmt.Errorf("payload nested more than %d deep", events.MaxPayloadDepth)
	}
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		var u uint64
		if _, err := fmt.Sscan(string(x), &u); err == nil && !strings.ContainsAny(string(x), ".eE-") {
			return u, nil
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("number %s out of range", x)
		}
		return f, nil
	case map[string]any:
		if x == nil {
			return nil, nil
		}
		for k, y := range x {
			n, err := numbers(y, depth+1)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
		return x, nil
	case []any:
		for i, y := range x {
			n, err := numbers(y, depth+1)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
		return x, nil
	}
	return v, nil
}
