package algo

import (
	"fmt"
	"math"
)

// GRPOEpsilon is added to a group's standard deviation before dividing by it.
const GRPOEpsilon = 1e-6

// whitenEpsilon is added to the variance in masked whitening.
const whitenEpsilon = 1e-8

// meanEpsilon is added to the count in masked means, as veRL's masked_mean does.
const meanEpsilon = 1e-8

func checkLen(name string, x []float32, B, T int) {
	if B < 0 || T < 0 {
		panic(fmt.Sprintf("algo: negative shape B=%d T=%d", B, T))
	}
	if len(x) != B*T {
		panic(fmt.Sprintf("algo: %s has %d elements, want B*T = %d*%d = %d", name, len(x), B, T, B*T))
	}
}

// GRPOAdvantages is the outcome-reward GRPO estimator (veRL's compute_grpo_outcome_advantage).
// Each sequence's score is the sum of its token rewards over all T positions; sequences are
// grouped by groups[b] (the prompt uid). A group of one has mean 0 and std 1; a larger group
// has its mean and sample standard deviation (n-1). With normByStd the advantage is
// (s - mean)/(std + 1e-6), without it (Dr.GRPO) s - mean. The advantage is broadcast over the
// sequence's tokens and multiplied by mask; returns equal the advantages.
//
//	tokenRewards, mask [B*T]; groups [B]
func GRPOAdvantages(tokenRewards, mask []float32, B, T int, groups []string, normByStd bool) (adv, returns []float32) {
	checkLen("tokenRewards", tokenRewards, B, T)
	checkLen("mask", mask, B, T)
	if len(groups) != B {
		panic(fmt.Sprintf("algo: groups has %d elements, want B = %d", len(groups), B))
	}
	scores := make([]float64, B)
	for b := 0; b < B; b++ {
		s := 0.0
		for _, r := range tokenRewards[b*T : (b+1)*T] {
			s += float64(r)
		}
		scores[b] = s
	}
	members := map[string][]int{}
	for b, g := range groups {
		members[g] = append(members[g], b)
	}
	scalar := make([]float64, B)
	for _, idx := range members {
		mean, std := 0.0, 1.0
		if n := len(idx); n > 1 {
			mean = 0
			for _, b := range idx {
				mean += scores[b]
			}
			mean /= float64(n)
			v := 0.0
			for _, b := range idx {
				d := scores[b] - mean
				v += d * d
			}
			std = math.Sqrt(v / float64(n-1))
		}
		for _, b := range idx {
			if normByStd {
				scalar[b] = (scores[b] - mean) / (std + GRPOEpsilon)
			} else {
				scalar[b] = scores[b] - mean
			}
		}
	}
	adv = make([]float32, B*T)
	for b := 0; b < B; b++ {
		for t := 0; t < T; t++ {
			if m := mask[b*T+t]; m != 0 {
				adv[b*T+t] = float32(scalar[b] * float64(m))
			}
		}
	}
	returns = make([]float32, B*T)
	copy(returns, adv)
	return adv, returns
}

// GAEAdvantages is generalised advantage estimation with a critic (veRL's
// compute_gae_advantage_return). Backwards over t:
//
//	delta = r_t + gamma*V_next - V_t
//	G     = delta + gamma*lam*G
//
// where tokens with mask 0 (tool and user tokens, padding) are skipped: V_next and G carry
// over them unchanged. returns = G + V (before whitening); the advantages are then whitened
// over the mask (see [MaskedWhiten]). As in veRL, positions with mask 0 keep the carried value
// rather than 0; every loss multiplies them by the mask.
//
//	tokenRewards, values, mask [B*T]
func GAEAdvantages(tokenRewards, values, mask []float32, B, T int, gamma, lam float64) (adv, returns []float32) {
	adv, returns, _ = gaeAdvantages(tokenRewards, values, mask, B, T, gamma, lam, nil)
	return adv, returns
}

// gaeAdvantages is GAEAdvantages whitening with the batch's sums added by sum (Sum).
func gaeAdvantages(tokenRewards, values, mask []float32, B, T int, gamma, lam float64, sum Sum) (adv, returns []float32, err error) {
	checkLen("tokenRewards", tokenRewards, B, T)
	checkLen("values", values, B, T)
	checkLen("mask", mask, B, T)
	raw := make([]float64, B*T)
	returns = make([]float32, B*T)
	for b := 0; b < B; b++ {
		next, last := 0.0, 0.0
		for t := T - 1; t >= 0; t-- {
			i := b*T + t
			m := float64(mask[i])
			v := float64(values[i])
			delta := float64(tokenRewards[i]) + gamma*next - v
			g := delta + gamma*lam*last
			next = v*m + (1-m)*next
			last = g*m + (1-m)*last
			raw[i] = last
			returns[i] = float32(last + v)
		}
	}
	w, err := maskedWhiten(raw, mask, sum)
	return toFloat32(w), returns, err
}

// REINFORCEPlusPlusAdvantages is REINFORCE++ (veRL's
// compute_reinforce_plus_plus_outcome_advantage): discounted returns backwards over t,
// G_t = r_t + gamma*G_{t+1}, where the running return is reset to 0 after a token with mask 0;
// the advantages are the returns whitened over the mask (see [MaskedWhiten]), times the mask.
//
//	tokenRewards, mask [B*T]
func REINFORCEPlusPlusAdvantages(tokenRewards, mask []float32, B, T int, gamma float64) (adv, returns []float32) {
	adv, returns, _ = reinforcePlusPlusAdvantages(tokenRewards, mask, B, T, gamma, nil)
	return adv, returns
}

// reinforcePlusPlusAdvantages is REINFORCEPlusPlusAdvantages whitening with the batch's sums
// added by sum (Sum).
func reinforcePlusPlusAdvantages(tokenRewards, mask []float32, B, T int, gamma float64, sum Sum) (adv, returns []float32, err error) {
	checkLen("tokenRewards", tokenRewards, B, T)
	checkLen("mask", mask, B, T)
	ret := make([]float64, B*T)
	for b := 0; b < B; b++ {
		run := 0.0
		for t := T - 1; t >= 0; t-- {
			i := b*T + t
			run = float64(tokenRewards[i]) + gamma*run
			ret[i] = run
			run *= float64(mask[i])
		}
	}
	w, err := maskedWhiten(ret, mask, sum)
	adv = make([]float32, B*T)
	for i := range w {
		adv[i] = float32(w[i] * float64(mask[i]))
	}
	return adv, toFloat32(ret), err
}

// MaskedWhiten returns (x - mean)/sqrt(var + 1e-8) with the mean and the variance taken over
// the elements where mask is 1; the variance has Bessel's correction (n/(n-1)). Where veRL
// raises an error, it does not: with no valid element it returns x unchanged, and with one
// it uses the uncorrected variance (0), which maps the lone element to 0.
func MaskedWhiten(x, mask []float32) []float32 {
	if len(x) != len(mask) {
		panic(fmt.Sprintf("algo: MaskedWhiten: x has %d elements, mask %d", len(x), len(mask)))
	}
	w, _ := maskedWhiten(toFloat64(x), mask, nil)
	return toFloat32(w)
}

// Sum adds xs, sums over a batch, over the other parts of the batch, in place: the ranks of
// a data-parallel job each hold a part, and a batch-wide statistic (the mean and variance of
// whitening) is the whole batch's. nil: the batch is whole here.
type Sum func(xs []float64) error

func maskedWhiten(x []float64, mask []float32, sum Sum) ([]float64, error) {
	n, s := 0.0, 0.0
	for i, v := range x {
		m := float64(mask[i])
		n += m
		s += v * m
	}
	if sum != nil {
		ns := []float64{n, s}
		if err := sum(ns); err != nil {
			return nil, err
		}
		n, s = ns[0], ns[1]
	}
	out := make([]float64, len(x))
	if n == 0 {
		copy(out, x)
		return out, nil
	}
	mean := s / (n + meanEpsilon)
	if n == 1 {
		mean = s // the lone element itself, so that it maps to exactly 0
	}
	ss := 0.0
	for i, v := range x {
		d := v - mean
		ss += d * d * float64(mask[i])
	}
	if sum != nil {
		t := []float64{ss}
		if err := sum(t); err != nil {
			return nil, err
		}
		ss = t[0]
	}
	variance := ss / (n + meanEpsilon)
	if n > 1 {
		variance *= n / (n - 1)
	}
	inv := 1 / math.Sqrt(variance+whitenEpsilon)
	for i, v := range x {
		out[i] = (v - mean) * inv
	}
	return out, nil
}

// MaskedMean is sum(x*mask)/(sum(mask) + 1e-8), veRL's masked_mean; 0 when the mask is empty.
func MaskedMean(x, mask []float32) float64 {
	if len(x) != len(mask) {
		panic(fmt.Sprintf("algo: MaskedMean: x has %d elements, mask %d", len(x), len(mask)))
	}
	n, s := 0.0, 0.0
	for i, v := range x {
		n += float64(mask[i])
		s += float64(v) * float64(mask[i])
	}
	return s / (n + meanEpsilon)
}

func toFloat32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func toFloat64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
