package monoclock

import (
	"testing"
	"time"
)

// TestNowAdvances: the clock reads, never goes back, and advances with
// real time.
func TestNowAdvances(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
	a := Now()
	time.Sleep(10 * time.Millisecond)
	b := Now()
	if a <= 0 || b-a < int64(10*time.Millisecond) || b-a > int64(time.Second) {
		t.Errorf("Now() = %d then %d after a 10 ms sleep", a, b)
	}
}
