package daemon

import (
	"context"
	"sync"
	"time"
)

// sampleEvery calls sample under mu every period with the tick's time
// and the time since the previous tick, until ctx ends; then it closes
// done. The reservation and send-rate loops run on it.
func sampleEvery(ctx context.Context, period time.Duration, mu *sync.Mutex, done chan struct{}, sample func(now time.Time, dt time.Duration)) {
	defer close(done)
	tick := time.NewTicker(period)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			mu.Lock()
			sample(now, now.Sub(last))
			mu.Unlock()
			last = now
		}
	}
}
