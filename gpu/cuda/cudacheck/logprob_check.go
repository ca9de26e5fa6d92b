package cudacheck

// Checks of the logprob family against the CPU reference gpu/cpu (logprob.go).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

func CheckLogprob(b Device) error {
	r := rand.New(rand.NewPCG(12, 12))
	const N, V = 9, 1000
	logits := checkutil.Randn(r, N*V, 4)
	targets := make([]int32, N)
	for i := range targets {
		targets[i] = int32(r.IntN(V))
	}
	targets[3] = -1
	lp1, lp2, h1, h2 := make([]float32, N), make([]float32, N), make([]float32, N), make([]float32, N)
	l1, l2 := make([]float32, N), make([]float32, N)
	checkutil.Ref.LogprobForward(lp1, h1, l1, logits, targets, N, V)
	b.LogprobForward(lp2, h2, l2, logits, targets, N, V)
	if err := checkutil.CompareAll(1e-5, "logp", lp2, lp1, "entropy", h2, h1, "lse", l2, l1); err != nil {
		return err
	}
	dlogp, dent := checkutil.Randn(r, N, 1), checkutil.Randn(r, N, 1)
	d1, d2 := checkutil.Clone(logits), checkutil.Clone(logits) // dlogits aliases logits
	checkutil.Ref.LogprobBackward(d1, d1, l1, h1, targets, dlogp, dent, N, V)
	b.LogprobBackward(d2, d2, l1, h1, targets, dlogp, dent, N, V)
	return checkutil.Compare("dlogits", d2, d1, 1e-5)
}

// logprobRow is one row of checkLogprobRows: its logits and target,
// and what it is.
type logprobRow struct {
	Kind   string
	z      []float32
	target int32
}

// logprobRows are the rows of checkLogprobRows, by V: at Qwen2.5's V
// (151936) a language model's spread, a flat row, a very peaked one,
// logits over +-1e4 and around 1e4, the max the last element (and the
// target), the max the first, rows rising and falling throughout (a new
// running max at every chunk of every thread, or never after the first);
// targets -1 among them. Then widths that leave threads idle (1, 3, 255),
// a width not a multiple of 4 (1001: the rows start at every 16-byte
// alignment) and one of a full step of unrolled loads and single ones
// (5127), of a few rows each.
func logprobRows(r *rand.Rand) map[int][]logprobRow {
	const V = 151936
	rows := map[int][]logprobRow{}
	fill := func(n int, f func(j int) float32) []float32 {
		z := make([]float32, n)
		for j := range z {
			z[j] = f(j)
		}
		return z
	}
	normal := func(n int, s float64) []float32 { return checkutil.Randn(r, n, s) }
	peak := normal(V, 1)
	ip := r.IntN(V)
	peak[ip] = 40
	last := normal(V, 2)
	last[V-1] = 20
	first := normal(V, 2)
	first[0] = 20
	rows[V] = []logprobRow{
		{"spread (std 4)", normal(V, 4), int32(r.IntN(V))},
		{"flat", fill(V, func(int) float32 { return 0.37 }), 0},
		{"peaked", peak, int32(ip)},
		{"uniform +-1e4", fill(V, func(int) float32 { return float32(2e4*r.Float64() - 1e4) }), int32(r.IntN(V))},
		{"around 1e4", fill(V, func(int) float32 { return float32(1e4 + 2*r.NormFloat64()) }), -1},
		{"max last", last, V - 1},
		{"max first", first, -1},
		{"rising", fill(V, func(j int) float32 { return float32(j) * 1e-4 }), V - 1},
		{"falling", fill(V, func(j int) float32 { return -float32(j) * 1e-4 }), 0},
	}
	for _, n := range []int{1, 3, 255, 1001, 5127} {
		for i := range 5 {
			z := normal(n, 3)
			if i == 4 {
				for j := range z {
					z[j] = 1e4 - z[j]
				}
			}
			t := int32(r.IntN(n))
			if i == 1 {
				t = -1
			}
			rows[n] = append(rows[n], logprobRow{fmt.Sprintf("std 3 #%d", i), z, t})
		}
	}
	return rows
}

// LogprobOut is one row's log-prob, entropy and lse from the CPU
// reference and from the device.
type LogprobOut struct {
	V        int
	Row      logprobRow
	Cpu, Dev [3]float32
}

var LogprobOutNames = [3]string{"logp", "entropy", "lse"}

// LogprobOuts runs logprobRows through the CPU reference and LogprobForward:
// the rows of each V in one call, and the first V's rows once more from a
// device tensor one float past its start (every row 4 bytes off a 16-byte
// boundary).
func LogprobOuts(b Device) []LogprobOut {
	r := rand.New(rand.NewPCG(31, 31))
	rows := logprobRows(r)
	var widths []int
	for V := range rows {
		widths = append(widths, V)
	}
	slices.Sort(widths)
	var outs []LogprobOut
	run := func(V int, rs []logprobRow, offset bool) {
		N := len(rs)
		logits, targets := make([]float32, 0, N*V), make([]int32, N)
		for i, row := range rs {
			logits = append(logits, row.z...)
			targets[i] = row.target
		}
		var cpuOut, dev [3][]float32
		for q := range cpuOut {
			cpuOut[q], dev[q] = make([]float32, N), make([]float32, N)
		}
		checkutil.Ref.LogprobForward(cpuOut[0], cpuOut[1], cpuOut[2], logits, targets, N, V)
		in := logits
		if offset {
			t := b.Alloc("check logits", N*V+1)
			defer b.Free(t)
			b.Upload(t[1:], logits)
			in = t[1:]
		}
		b.LogprobForward(dev[0], dev[1], dev[2], in, targets, N, V)
		for i, row := range rs {
			o := LogprobOut{V: V, Row: row}
			if offset {
				o.Row.Kind += ", 4 bytes off"
			}
			for q := range 3 {
				o.Cpu[q], o.Dev[q] = cpuOut[q][i], dev[q][i]
			}
			outs = append(outs, o)
		}
	}
	for _, V := range widths {
		run(V, rows[V], false)
	}
	big := widths[len(widths)-1]
	run(big, rows[big], true)
	return outs
}

// LogprobTol bounds checkLogprobRows, relative to max(1, |value|) (checkLogprob's).
// Measured on the emulator (TestLogprobRowsDiffs; docs/gpu.md, "The
// log-softmax forward in one pass"): at most 1.2e-7, one float rounding of
// the results.
const LogprobTol = 1e-5

// checkLogprobRows: LogprobForward on the rows of logprobRows (Qwen2.5's and
// Llama's vocabularies, peaked, flat and far-off rows) against the CPU
// reference, row by row.
func checkLogprobRows(b Device) error {
	for _, o := range LogprobOuts(b) {
		for q, name := range LogprobOutNames {
			d := math.Abs(float64(o.Dev[q]) - float64(o.Cpu[q]))
			if lim := LogprobTol * max(1, math.Abs(float64(o.Cpu[q]))); !(d <= lim) {
				return fmt.Errorf("V=%d row %q (target %d): %s %g on cuda, %g on cpu (|diff| %.3g > %.3g)",
					o.V, o.Row.Kind, o.Row.target, name, o.Dev[q], o.Cpu[q], d, lim)
			}
		}
	}
	return nil
}
