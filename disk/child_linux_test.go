package disk

import (
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

// TestMain lets the test binary play the child roles of testutil.StartChild.
func TestMain(m *testing.M) { testutil.ChildMain(m) }
