package cuda

import (
	"math"
	"math/rand/v2"
	"testing"
)

// lpState is kernels/logprob.cuh's lp_state in float64: over the values
// added, m their max, se = sum exp(z-m), sez = sum exp(z-m)*(z-m).
type lpState struct{ m, se, sez float64 }

// shift is lp_shift: the state moved to m >= s.m, r = exp(-dm),
// se' = r*se, sez' = r*(sez - dm*se).
func (s *lpState) shift(m float64) {
	if s.m != math.Inf(-1) {
		dm := m - s.m
		r := math.Exp(-dm)
		s.sez = r * (s.sez - dm*s.se)
		s.se *= r
	}
	s.m = m
}

// add is lp_chunk over one chunk.
func (s *lpState) add(chunk []float64) {
	cm := math.Inf(-1)
	for _, z := range chunk {
		cm = max(cm, z)
	}
	if cm > s.m {
		s.shift(cm)
	}
	for _, z := range chunk {
		e := math.Exp(z - s.m)
		s.se += e
		s.sez += e * (z - s.m)
	}
}

// TestLogprobOnlineRecurrence checks the one-pass kernel's algebra in
// float64, apart from its fp32 parts: values dealt to threads in chunks
// (each thread's running state moving to every larger max), the states
// moved to the largest max and summed give se and sez of the two-pass
// formulas (the max first) to rounding; without the shift of sez the
// result is far off.
func TestLogprobOnlineRecurrence(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for _, tc := range []struct {
		name string
		z    func(j int) float64
	}{
		{"normal", func(int) float64 { return 4 * r.NormFloat64() }},
		{"rising", func(j int) float64 { return float64(j) * 1e-3 }},
		{"large", func(int) float64 { return 2e4*r.Float64() - 1e4 }},
	} {
		const V, threads, chunk = 10007, 16, 8
		z := make([]float64, V)
		m := math.Inf(-1)
		for j := range z {
			z[j] = tc.z(j)
			m = max(m, z[j])
		}
		var se, sez float64 // two passes
		for _, x := range z {
			e := math.Exp(x - m)
			se += e
			sez += e * (x - m)
		}
		states := make([]lpState, threads)
		for i := range states {
			states[i].m = math.Inf(-1)
		}
		for c, j := 0, 0; j < V; c, j = c+1, j+chunk {
			states[c%threads].add(z[j:min(j+chunk, V)])
		}
		M := math.Inf(-1)
		for _, s := range states {
			M = max(M, s.m)
		}
		var se1, sez1, sezBad float64
		for _, s := range states {
			bad := s.sez * math.Exp(s.m-M) // the shift left out
			s.shift(M)
			se1 += s.se
			sez1 += s.sez
			sezBad += bad
		}
		if M != m || math.Abs(se1-se) > 1e-12*se || math.Abs(sez1-sez) > 1e-12*math.Abs(sez)+1e-300 {
			t.Errorf("%s: max %g se %.17g sez %.17g in one pass; %g %.17g %.17g in two", tc.name, M, se1, sez1, m, se, sez)
		}
		if math.Abs(sezBad-sez) < 1e-3*math.Abs(sez) {
			t.Errorf("%s: sez without the shift %.17g, with it %.17g: the test cannot tell them apart", tc.name, sezBad, sez)
		}
	}
}
