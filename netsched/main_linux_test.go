package netsched

import (
	"testing"

	"github.com/lanes-qos/lanes/internal/testutil"
)

func TestMain(m *testing.M) { testutil.ChildMain(m) }
