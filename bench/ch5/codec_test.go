package ch5

import (
	"math"
	"runtime"
	"testing"
	"time"
)

// TestCodecRoundTrip checks that a decoded frame is the encoded one within
// the quantiser's error, at several qualities.
func TestCodecRoundTrip(t *testing.T) {
	for _, q := range []int{1, 10, 50, 100} {
		var f, g Frame
		Synthesize(&f, uint32(q)*7, q)
		var e Encoder
		var d Decoder
		data, err := e.Encode(&f)
		if err != nil {
			t.Fatalf("q%d: %v", q, err)
		}
		if err := d.Decode(data, &g); err != nil {
			t.Fatalf("q%d: %v", q, err)
		}
		if g.Seq != f.Seq || g.Quality != q || len(g.Pix) != len(f.Pix) {
			t.Fatalf("q%d: decoded seq %d quality %d %d samples, want %d %d %d", q, g.Seq, g.Quality, len(g.Pix), f.Seq, q, len(f.Pix))
		}
		var se float64
		for i := range f.Pix {
			d := float64(f.Pix[i]) - float64(g.Pix[i])
			se += d * d
		}
		psnr := 10 * math.Log10(255*255/(se/float64(len(f.Pix))))
		if psnr < 25 {
			t.Errorf("q%d: PSNR %.1f dB: want >= 25", q, psnr)
		}
		t.Logf("q%d: %d samples -> %d bytes, PSNR %.1f dB", q, len(f.Pix), len(data), psnr)
	}
}

func TestDecodeRefusesGarbage(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"short", []byte{1, 2, 3}},
		{"no blocks", []byte{0, 0, 0, 0, 50, 0, 0, 1, 2}},
		{"too many blocks", []byte{0, 0, 0, 0, 50, 0xff, 0xff, 1, 2}},
		{"not deflate", []byte{0, 0, 0, 0, 50, 1, 0, 0xff, 0xff, 0xff}},
	} {
		var d Decoder
		var f Frame
		if err := d.Decode(tc.data, &f); err == nil {
			t.Errorf("%s: decoded", tc.name)
		}
	}
}

// TestCodecCostScales measures encode+decode CPU time per frame (the
// thread's, so that other load on the host counts less): it must grow
// with quality (the experiment depends on it).
func TestCodecCostScales(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cost := func(q int) time.Duration {
		var f, g Frame
		var e Encoder
		var d Decoder
		best := time.Hour
		for i := range 5 {
			Synthesize(&f, uint32(i), q)
			t0 := threadCPU()
			data, err := e.Encode(&f)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(data, &g); err != nil {
				t.Fatal(err)
			}
			best = min(best, time.Duration(threadCPU()-t0))
		}
		return best
	}
	c10, c100 := cost(10), cost(100)
	t.Logf("encode+decode: q10 %v, q100 %v", c10, c100)
	if c100 < 5*c10 {
		t.Errorf("q100 costs %v, q10 %v: want at least 5x", c100, c10)
	}
}
