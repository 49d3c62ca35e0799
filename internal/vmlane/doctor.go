package vmlane

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Mechanism is one entry of `lanes doctor --json` (api.Mechanism; its
// JSON fields may be added to, never changed).
type Mechanism struct {
	Resource  string `json:"resource"`
	Backend   string `json:"backend"`
	Preferred bool   `json:"preferred"`
	Reason    string `json:"reason"`
	OK        bool   `json:"ok"`
}

// ParseDoctorJSON reads the mechanisms from `lanes doctor --json`.
func ParseDoctorJSON(text string) ([]Mechanism, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	var resp struct {
		Kernel     string      `json:"kernel"`
		Mechanisms []Mechanism `json:"mechanisms"`
	}
	if err := json.Unmarshal([]byte(text), &resp); err != nil {
		return nil, fmt.Errorf("lanes doctor --json: %w", err)
	}
	return resp.Mechanisms, nil
}

// cell is how a mechanism's backend appears in the docs table.
func (m Mechanism) cell() string {
	switch {
	case !m.OK:
		return "MISSING: " + m.Reason
	case m.Preferred:
		return m.Backend
	default:
		return m.Backend + " (fallback)"
	}
}
