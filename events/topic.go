package events

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ValidateTopic checks a topic an event is published on: dot-separated,
// non-empty tokens of letters, digits and "_-:", at most MaxTopicLen bytes.
func ValidateTopic(topic string) error {
	return validate(topic, false)
}

// ValidatePattern checks a subscription's topic pattern: a topic whose
// tokens may also be "*" (any one token) or, as the last token, ">" (one
// or more tokens).
func ValidatePattern(pattern string) error {
	return validate(pattern, true)
}

func validate(s string, pattern bool) error {
	what := "topic"
	if pattern {
		what = "topic pattern"
	}
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if len(s) > MaxTopicLen {
		return fmt.Errorf("%s %.40q... is %d bytes, more than %d", what, s, len(s), MaxTopicLen)
	}
	toks := strings.Split(s, ".")
	for i, t := range toks {
		if t == "" {
			return fmt.Errorf("%s %q has an empty token (at %d)", what, s, i+1)
		}
		if pattern && t == "*" {
			continue
		}
		if pattern && t == ">" {
			if i != len(toks)-1 {
				return fmt.Errorf("%s %q: \">\" must be the last token", what, s)
			}
			continue
		}
		for _, r := range t {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == ':') {
				if !pattern && (r == '*' || r == '>') {
					return fmt.Errorf("topic %q: wildcards are for subscriptions, not events", s)
				}
				return fmt.Errorf("%s %q: character %q is not allowed (letters, digits, _ - :)", what, s, r)
			}
		}
	}
	return nil
}

// Match reports whether topic matches pattern (both valid).
func Match(pattern, topic string) bool {
	for {
		pi := strings.IndexByte(pattern, '.')
		ti := strings.IndexByte(topic, '.')
		ptok, ttok := pattern, topic
		if pi >= 0 {
			ptok = pattern[:pi]
		}
		if ti >= 0 {
			ttok = topic[:ti]
		}
		if ptok == ">" {
			return true
		}
		if ptok != "*" && ptok != ttok {
			return false
		}
		switch {
		case pi < 0 && ti < 0:
			return true
		case pi < 0 || ti < 0:
			return false
		}
		pattern, topic = pattern[pi+1:], topic[ti+1:]
	}
}

func matchAny(patterns []string, topic string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return Match(p, topic) })
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
