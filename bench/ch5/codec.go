package ch5

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// The codec: a frame of Quality×BlocksPerQuality 8×8 blocks of 8-bit
// samples is transformed block by block with a separable DCT-II,
// quantised with one step, zig-zag ordered and DEFLATE-compressed; the
// decoder inflates, dequantises and inverts the transform. The work per
// frame is proportional to the quality setting, on both ends.

// BlocksPerQuality is the number of 8×8 blocks a frame has per quality
// unit (quality 100: 100×BlocksPerQuality blocks). Calibrated so that a
// quality-100 frame costs about a third of a core at 20 frames/s on the
// testbed host (docs/BENCHMARKS.md, chapter 5).
const BlocksPerQuality = 52

// MinQuality and MaxQuality bound the quality setting.
const (
	MinQuality = 1
	MaxQuality = 100
)

// quantStep is the quantiser step of every coefficient.
const quantStep = 32

// cosTable[u][x] = c(u)·cos((2x+1)uπ/16)/2, the DCT-II basis.
var cosTable = func() (t [8][8]float64) {
	for u := 0; u < 8; u++ {
		c := 1.0
		if u == 0 {
			c = 1 / math.Sqrt2
		}
		for x := 0; x < 8; x++ {
			t[u][x] = c * math.Cos(float64(2*x+1)*float64(u)*math.Pi/16) / 2
		}
	}
	return t
}()

// Frame is a synthetic picture: Blocks 8×8 blocks of samples, smooth
// gradients with moving texture and noise (compressible, but not
// trivially).
type Frame struct {
	Seq     uint32
	Quality int
	Pix     []uint8 // Blocks×64 samples, block after block
}

// Blocks is the number of 8×8 blocks of a frame at quality q.
func Blocks(q int) int { return q * BlocksPerQuality }

// Synthesize fills a frame's samples for frame number seq at quality q,
// reusing f.Pix.
func Synthesize(f *Frame, seq uint32, q int) {
	n := Blocks(q) * 64
	if cap(f.Pix) < n {
		f.Pix = make([]uint8, n)
	}
	f.Pix = f.Pix[:n]
	f.Seq, f.Quality = seq, q
	s := uint64(seq)*0x9E3779B97F4A7C15 + 1
	var sx, cy [8]float64
	for b := 0; b < n/64; b++ {
		base := float64((b*7+int(seq)*3)%160) + 40
		for i := range 8 {
			sx[i] = 30 * math.Sin(float64(i+b+int(seq))/5)
			cy[i] = 20 * math.Cos(float64(i*3+b)/7)
		}
		for y := 0; y < 8; y++ {
			for x := 0; x < 8; x++ {
				s ^= s << 13
				s ^= s >> 7
				s ^= s << 17
				v := base + sx[x] + cy[y] + float64(int(s&15)-8)
				f.Pix[b*64+y*8+x] = uint8(max(0, min(255, v)))
			}
		}
	}
}

// PSNR is the peak signal-to-noise ratio of b against the reference a in
// dB (99 when they are equal).
func PSNR(a, b []uint8) float64 {
	n := min(len(a), len(b))
	if n == 0 {
		return 0
	}
	var se float64
	for i := range n {
		d := float64(a[i]) - float64(b[i])
		se += d * d
	}
	if se == 0 {
		return 99
	}
	return 10 * math.Log10(255*255/(se/float64(n)))
}

// zigzag is the JPEG coefficient order (low frequencies first).
var zigzag = [64]int{
	0, 1, 8, 16, 9, 2, 3, 10, 17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
}

// Encoder encodes frames; it keeps its buffers between frames. Not safe
// for concurrent use.
type Encoder struct {
	buf  bytes.Buffer
	w    *flate.Writer
	coef []byte
}

// Encode returns the compressed frame: a 6-byte header (sequence number,
// quality, block count) and the DEFLATE stream of the quantised
// coefficients. The result is valid until the next call.
func (e *Encoder) Encode(f *Frame) ([]byte, error) {
	nb := len(f.Pix) / 64
	if cap(e.coef) < nb*64*2 {
		e.coef = make([]byte, nb*64*2)
	}
	coef := e.coef[:nb*64*2]
	var tmp, out [64]float64
	for b := 0; b < nb; b++ {
		blk := f.Pix[b*64 : b*64+64]
		for i := range 64 {
			tmp[i] = float64(blk[i]) - 128
		}
		fdct(&tmp, &out)
		for i, z := range zigzag {
			v := int16(math.Round(out[z] / quantStep))
			binary.LittleEndian.PutUint16(coef[(b*64+i)*2:], uint16(v))
		}
	}
	e.buf.Reset()
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[0:], f.Seq)
	hdr[4] = byte(f.Quality)
	binary.LittleEndian.PutUint16(hdr[5:], uint16(nb))
	e.buf.Write(hdr[:7])
	if e.w == nil {
		w, err := flate.NewWriter(&e.buf, flate.DefaultCompression)
		if err != nil {
			return nil, fmt.Errorf("encode frame %d: %w", f.Seq, err)
		}
		e.w = w
	} else {
		e.w.Reset(&e.buf)
	}
	if _, err := e.w.Write(coef); err != nil {
		return nil, fmt.Errorf("encode frame %d: %w", f.Seq, err)
	}
	if err := e.w.Close(); err != nil {
		return nil, fmt.Errorf("encode frame %d: %w", f.Seq, err)
	}
	return e.buf.Bytes(), nil
}

// Decoder decodes frames; it keeps its buffers between frames. Not safe
// for concurrent use.
type Decoder struct {
	r    io.ReadCloser
	src  bytes.Reader
	coef []byte
}

// Decode decodes a frame produced by Encode into f (reusing f.Pix).
func (d *Decoder) Decode(data []byte, f *Frame) error {
	if len(data) < 7 {
		return fmt.Errorf("decode frame: %d bytes: want at least 7", len(data))
	}
	f.Seq = binary.LittleEndian.Uint32(data[0:])
	f.Quality = int(data[4])
	nb := int(binary.LittleEndian.Uint16(data[5:]))
	if nb == 0 || nb > Blocks(MaxQuality) {
		return fmt.Errorf("decode frame %d: %d blocks: want 1..%d", f.Seq, nb, Blocks(MaxQuality))
	}
	d.src.Reset(data[7:])
	if d.r == nil {
		d.r = flate.NewReader(&d.src)
	} else if err := d.r.(flate.Resetter).Reset(&d.src, nil); err != nil {
		return fmt.Errorf("decode frame %d: %w", f.Seq, err)
	}
	if cap(d.coef) < nb*128 {
		d.coef = make([]byte, nb*128)
	}
	coef := d.coef[:nb*128]
	if _, err := io.ReadFull(d.r, coef); err != nil {
		return fmt.Errorf("decode frame %d: %w", f.Seq, err)
	}
	if cap(f.Pix) < nb*64 {
		f.Pix = make([]uint8, nb*64)
	}
	f.Pix = f.Pix[:nb*64]
	var in, out [64]float64
	for b := 0; b < nb; b++ {
		for i, z := range zigzag {
			in[z] = float64(int16(binary.LittleEndian.Uint16(coef[(b*64+i)*2:]))) * quantStep
		}
		idct(&in, &out)
		for i := range 64 {
			f.Pix[b*64+i] = uint8(max(0, min(255, math.Round(out[i]+128))))
		}
	}
	return nil
}

// fdct is the 2-D DCT-II of an 8×8 block, rows then columns.
func fdct(in, out *[64]float64) {
	var rows [64]float64
	for y := 0; y < 8; y++ {
		for u := 0; u < 8; u++ {
			s := 0.0
			for x := 0; x < 8; x++ {
				s += cosTable[u][x] * in[y*8+x]
			}
			rows[y*8+u] = s
		}
	}
	for u := 0; u < 8; u++ {
		for v := 0; v < 8; v++ {
			s := 0.0
			for y := 0; y < 8; y++ {
				s += cosTable[v][y] * rows[y*8+u]
			}
			out[v*8+u] = s
		}
	}
}

// idct inverts fdct.
func idct(in, out *[64]float64) {
	var cols [64]float64
	for u := 0; u < 8; u++ {
		for y := 0; y < 8; y++ {
			s := 0.0
			for v := 0; v < 8; v++ {
				s += cosTable[v][y] * in[v*8+u]
			}
			cols[y*8+u] = s
		}
	}
	for y := 0; y < 8; y++ {
		for x := 0; x < 8; x++ {
			s := 0.0
			for u := 0; u < 8; u++ {
				s += cosTable[u][x] * cols[y*8+u]
			}
			out[y*8+x] = s
		}
	}
}
