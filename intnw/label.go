package intnw

import (
	"fmt"
	"strings"
)

// Label says what an IROB is for: Foreground (a user waits for it) or
// Background (it may be deferred), Small (latency-dominated) or Large
// (throughput-dominated). The zero Label is foreground small.
type Label uint8

// The label bits and the four labels.
const (
	Background Label = 1 << 0 // unset: foreground
	Large      Label = 1 << 1 // unset: small

	FGSmall = Label(0)
	FGLarge = Large
	BGSmall = Background
	BGLarge = Background | Large

	numLabels = 4
)

// Valid says whether l is one of the four labels.
func (l Label) Valid() bool { return l < numLabels }

// Foreground says whether l is a foreground label.
func (l Label) Foreground() bool { return l&Background == 0 }

// String is the label as ParseLabel reads it ("fg-small").
func (l Label) String() string {
	if !l.Valid() {
		return fmt.Sprintf("label(%d)", uint8(l))
	}
	s := "fg"
	if !l.Foreground() {
		s = "bg"
	}
	if l&Large != 0 {
		return s + "-large"
	}
	return s + "-small"
}

// ParseLabel reads a label: "fg-small", "fg-large", "bg-small" or
// "bg-large" ("foreground"/"background" and "_" or " " for "-" also do).
func ParseLabel(s string) (Label, error) {
	t := strings.NewReplacer("_", "-", " ", "-", "foreground", "fg", "background", "bg").Replace(strings.ToLower(strings.TrimSpace(s)))
	for l := Label(0); l < numLabels; l++ {
		if t == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("label %q: want fg-small, fg-large, bg-small or bg-large", s)
}
