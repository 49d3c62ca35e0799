package lane

import (
	"slices"
	"strings"
	"time"
)

// Events holds the settings of lanesd's event channels ([events]).
type Events struct {
	// History is how many events the state database keeps for replay
	// (`lanes events --since`); 0 keeps none.
	History int
	// Retention is the oldest an event in the history may be; 0: no age
	// limit (History alone bounds it).
	Retention time.Duration
	// HistoryTopics are the topic patterns the history keeps. High-rate
	// topics (proc.*) are left out by default: a process storm must not
	// become a write storm.
	HistoryTopics []string
}

// MaxEventHistory bounds events.history.
const MaxEventHistory = 10_000_000

type fileEvents struct {
	History       *int64   `toml:"history"`
	Retention     *string  `toml:"retention"`
	HistoryTopics []string `toml:"history_topics"`
}

func (v *validator) events(e *Events, fe *fileEvents) {
	if fe == nil {
		return
	}
	if fe.History != nil {
		if *fe.History < 0 || *fe.History > MaxEventHistory {
			v.add("events.history", "%d is outside 0..%d (events kept; 0 keeps none)", *fe.History, MaxEventHistory)
		} else {
			e.History = int(*fe.History)
		}
	}
	if fe.Retention != nil {
		d, err := time.ParseDuration(strings.TrimSpace(*fe.Retention))
		switch {
		case err != nil:
			v.add("events.retention", "invalid duration %q (want e.g. \"24h\", \"30m\"; \"0\" for no age limit)", *fe.Retention)
		case d < 0:
			v.add("events.retention", "%s is negative", d)
		default:
			e.Retention = d
		}
	}
	if fe.HistoryTopics != nil {
		e.HistoryTopics = slices.Clone(fe.HistoryTopics)
		for _, p := range e.HistoryTopics {
			if msg := topicPatternProblem(p); msg != "" {
				v.add("events.history_topics", "%s", msg)
			}
		}
	}
}

// topicPatternProblem says what is wrong with an event topic pattern (""
// when nothing): the rules of package events' ValidatePattern, repeated
// here so that the config (and the CLI, which reads it) need not link the
// event engine. TestTopicPatternsAgree in daemon keeps the two in step.
func topicPatternProblem(p string) string {
	if p == "" {
		return "empty topic pattern"
	}
	if len(p) > 256 {
		return "topic pattern longer than 256 bytes"
	}
	toks := strings.Split(p, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return "topic pattern " + quote(p) + " has an empty token"
		case t == "*":
		case t == ">":
			if i != len(toks)-1 {
				return "topic pattern " + quote(p) + `: ">" must be the last token`
			}
		default:
			for _, r := range t {
				if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == ':') {
					return "topic pattern " + quote(p) + ": character " + quote(string(r)) + " is not allowed (letters, digits, _ - :, and * or > as a whole token)"
				}
			}
		}
	}
	return ""
}

// TopicPatternProblem is topicPatternProblem for other packages' tests.
func TopicPatternProblem(p string) string { return topicPatternProblem(p) }

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
