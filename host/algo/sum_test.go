package algo

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/dist"
)

// TestAdvantagesSumOverRanks: the estimators with batch-wide statistics (gae's,
// reinforce_plus_plus's and reinforce_plus_plus_baseline's whitening, gpg's counts), run on
// two halves of a batch whose sums are added over two ranks (AdvantageInput.Sum), give the
// whole batch's advantages; without the sums the halves' own statistics give others.
func TestAdvantagesSumOverRanks(t *testing.T) {
	const B, T = 8, 5
	r := rand.New(rand.NewPCG(3, 3))
	in := AdvantageInput{TokenRewards: make([]float32, B*T), Mask: make([]float32, B*T), Values: make([]float32, B*T),
		B: B, T: T, Groups: make([]string, B), Gamma: 0.99, Lam: 0.95}
	for i := range in.Mask {
		if r.Float64() < 0.8 {
			in.Mask[i] = 1
		}
		in.Values[i] = float32(r.NormFloat64())
		if i%T == T-1 {
			in.TokenRewards[i] = float32(r.IntN(3)) - 1
		}
	}
	for b := range in.Groups {
		in.Groups[b] = string(rune('a' + b/2)) // groups of 2, whole on a half
	}
	half := func(x []float32, k int) []float32 { return x[k*B/2*T : (k+1)*B/2*T] }
	for _, name := range []string{EstimatorGAE, EstimatorREINFORCEPlusPlus, EstimatorREINFORCEPlusPlusBaseline, EstimatorGPG} {
		whole, _, err := Advantages(name, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, summed := range []bool{true, false} {
			comms := dist.NewLocal(2, 10*time.Second)
			got := make([][]float32, 2)
			var wg sync.WaitGroup
			for k, c := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := in
					p.B = B / 2
					p.TokenRewards, p.Mask, p.Values = half(in.TokenRewards, k), half(in.Mask, k), half(in.Values, k)
					p.Groups = in.Groups[k*B/2 : (k+1)*B/2]
					if summed {
						p.Sum = func(xs []float64) error { return c.AllReduce64(context.Background(), xs, dist.Sum) }
					}
					var err error
					if got[k], _, err = Advantages(name, p); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			worst := 0.0
			for k := range 2 {
				for i, v := range got[k] {
					worst = math.Max(worst, math.Abs(float64(v-half(whole, k)[i])))
				}
			}
			if summed && worst > 1e-6 {
				t.Errorf("%s: the halves with summed statistics differ from the whole batch's by %g", name, worst)
			}
			if !summed && worst < 1e-3 {
				t.Errorf("%s: the halves' own statistics give the whole batch's advantages (within %g): the test shows nothing", name, worst)
			}
		}
	}
}
