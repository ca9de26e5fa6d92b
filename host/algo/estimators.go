package algo

import (
	"fmt"
	"math"
)

// Advantage estimators (algorithm.adv_estimator).
const (
	EstimatorGAE                       = "gae"
	EstimatorGRPO                      = "grpo"
	EstimatorREINFORCEPlusPlus         = "reinforce_plus_plus"
	EstimatorREINFORCEPlusPlusBaseline = "reinforce_plus_plus_baseline"
	EstimatorRLOO                      = "rloo"
	EstimatorOPO                       = "opo"
	EstimatorGRPOPassK                 = "grpo_passk"
	EstimatorGPG                       = "gpg"
)

// Estimators lists the estimators [Advantages] accepts. veRL's remax needs the rewards of a
// greedy rollout as baselines and is not offered; Dr.GRPO is grpo with NormByStd false (and
// loss_agg_mode seq-mean-token-sum-norm).
var Estimators = []string{EstimatorGAE, EstimatorGRPO, EstimatorREINFORCEPlusPlus, EstimatorREINFORCEPlusPlusBaseline,
	EstimatorRLOO, EstimatorOPO, EstimatorGRPOPassK, EstimatorGPG}

// CheckEstimator returns an error naming the valid estimators if name is not one of them.
func CheckEstimator(name string) error {
	for _, e := range Estimators {
		if e == name {
			return nil
		}
	}
	if name == "remax" {
		return fmt.Errorf("algo: adv_estimator remax needs greedy-rollout reward baselines and is not supported (want one of %v)", Estimators)
	}
	return fmt.Errorf("algo: unknown adv_estimator %q (want one of %v)", name, Estimators)
}

// AdvantageInput is what the estimators need; each uses part of it.
type AdvantageInput struct {
	TokenRewards, Mask []float32 // [B*T]
	Values             []float32 // [B*T], gae only
	B, T               int
	Groups             []string // [B] prompt uids; the group-based estimators
	Gamma, Lam         float64  // gae (both), reinforce_plus_plus (Gamma)
	NormByStd          bool     // grpo, grpo_passk (algorithm.norm_adv_by_std_in_grpo)
	// Sum adds the batch-wide statistics' sums over the ranks of a data-parallel job (the
	// whitening of gae, reinforce_plus_plus and reinforce_plus_plus_baseline, gpg's counts);
	// nil: the batch is whole here. The other estimators' statistics are their groups'.
	Sum Sum
}

// Advantages runs the estimator named by name. The error is for an unknown name, a missing
// input (values for gae, groups for the group-based estimators) and grpo_passk's groups of
// one.
func Advantages(name string, in AdvantageInput) (adv, returns []float32, err error) {
	if err := CheckEstimator(name); err != nil {
		return nil, nil, err
	}
	if len(in.TokenRewards) != in.B*in.T || len(in.Mask) != in.B*in.T {
		return nil, nil, fmt.Errorf("algo: %s: token rewards (%d) and mask (%d) must have B*T = %d elements", name, len(in.TokenRewards), len(in.Mask), in.B*in.T)
	}
	grouped := name != EstimatorGAE && name != EstimatorREINFORCEPlusPlus
	if grouped && len(in.Groups) != in.B {
		return nil, nil, fmt.Errorf("algo: %s: %d group ids for %d sequences", name, len(in.Groups), in.B)
	}
	switch name {
	case EstimatorGAE:
		if len(in.Values) != in.B*in.T {
			return nil, nil, fmt.Errorf("algo: gae: values has %d elements, want B*T = %d (gae needs a critic)", len(in.Values), in.B*in.T)
		}
		adv, returns, err = gaeAdvantages(in.TokenRewards, in.Values, in.Mask, in.B, in.T, in.Gamma, in.Lam, in.Sum)
	case EstimatorGRPO:
		adv, returns = GRPOAdvantages(in.TokenRewards, in.Mask, in.B, in.T, in.Groups, in.NormByStd)
	case EstimatorREINFORCEPlusPlus:
		adv, returns, err = reinforcePlusPlusAdvantages(in.TokenRewards, in.Mask, in.B, in.T, in.Gamma, in.Sum)
	case EstimatorREINFORCEPlusPlusBaseline:
		adv, returns, err = reinforcePlusPlusBaselineAdvantages(in.TokenRewards, in.Mask, in.B, in.T, in.Groups, in.Sum)
	case EstimatorRLOO:
		adv, returns = RLOOAdvantages(in.TokenRewards, in.Mask, in.B, in.T, in.Groups)
	case EstimatorOPO:
		adv, returns = OPOAdvantages(in.TokenRewards, in.Mask, in.B, in.T, in.Groups)
	case EstimatorGRPOPassK:
		return GRPOPassKAdvantages(in.TokenRewards, in.Mask, in.B, in.T, in.Groups, in.NormByStd)
	case EstimatorGPG:
		adv, returns, err = gpgAdvantages(in.TokenRewards, in.Mask, in.B, in.T, in.Groups, in.Sum)
	}
	return adv, returns, err
}

// sequenceScores sums each row of tokenRewards over all T positions, as veRL does.
func sequenceScores(tokenRewards []float32, B, T int) []float64 {
	s := make([]float64, B)
	for b := 0; b < B; b++ {
		for _, r := range tokenRewards[b*T : (b+1)*T] {
			s[b] += float64(r)
		}
	}
	return s
}

// groupMembers returns the groups in order of first appearance, with their members.
func groupMembers(groups []string) [][]int {
	idx := map[string]int{}
	var out [][]int
	for b, g := range groups {
		i, ok := idx[g]
		if !ok {
			i = len(out)
			idx[g] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], b)
	}
	return out
}

// groupMean is the mean score of a group, 0 for a group of one.
func groupMean(scores []float64, members []int) float64 {
	if len(members) < 2 {
		return 0
	}
	m := 0.0
	for _, b := range members {
		m += scores[b]
	}
	return m / float64(len(members))
}

// broadcast returns scalar[b]*mask over [B*T], and a copy as returns.
func broadcast(scalar []float64, mask []float32, B, T int) (adv, returns []float32) {
	adv = make([]float32, B*T)
	for b := 0; b < B; b++ {
		for t := 0; t < T; t++ {
			if m := mask[b*T+t]; m != 0 {
				adv[b*T+t] = float32(scalar[b] * float64(m))
			}
		}
	}
	return adv, append([]float32(nil), adv...)
}

func checkGroups(groups []string, B int) {
	if len(groups) != B {
		panic(fmt.Sprintf("algo: groups has %d elements, want B = %d", len(groups), B))
	}
}

// REINFORCEPlusPlusBaselineAdvantages is REINFORCE++ with a group baseline (veRL's
// compute_reinforce_plus_plus_baseline_outcome_advantage): s - mean(group) (0 for a group
// of one), broadcast over the tokens, then whitened over the mask of the whole batch and
// multiplied by the mask. returns equal the advantages.
func REINFORCEPlusPlusBaselineAdvantages(tokenRewards, mask []float32, B, T int, groups []string) (adv, returns []float32) {
	adv, returns, _ = reinforcePlusPlusBaselineAdvantages(tokenRewards, mask, B, T, groups, nil)
	return adv, returns
}

// reinforcePlusPlusBaselineAdvantages is REINFORCEPlusPlusBaselineAdvantages whitening with
// the batch's sums added by sum (Sum).
func reinforcePlusPlusBaselineAdvantages(tokenRewards, mask []float32, B, T int, groups []string, sum Sum) (adv, returns []float32, err error) {
	checkLen("tokenRewards", tokenRewards, B, T)
	checkLen("mask", mask, B, T)
	checkGroups(groups, B)
	s := sequenceScores(tokenRewards, B, T)
	c := make([]float64, B)
	for _, members := range groupMembers(groups) {
		mean := groupMean(s, members)
		for _, b := range members {
			c[b] = s[b] - mean
		}
	}
	tiled := make([]float64, B*T)
	for i := range tiled {
		tiled[i] = c[i/max(T, 1)] * float64(mask[i])
	}
	w, err := maskedWhiten(tiled, mask, sum)
	adv = make([]float32, B*T)
	for i := range w {
		if mask[i] != 0 {
			adv[i] = float32(w[i] * float64(mask[i]))
		}
	}
	return adv, append([]float32(nil), adv...), err
}

// RLOOAdvantages is the leave-one-out baseline (veRL's compute_rloo_outcome_advantage): in a
// group of n > 1, A = s*n/(n-1) - mean*n/(n-1), i.e. s minus the mean of the others; a group
// of one keeps its score. Broadcast over the tokens times the mask; returns equal the
// advantages.
func RLOOAdvantages(tokenRewards, mask []float32, B, T int, groups []string) (adv, returns []float32) {
	checkLen("tokenRewards", tokenRewards, B, T)
	checkLen("mask", mask, B, T)
	checkGroups(groups, B)
	s := sequenceScores(tokenRewards, B, T)
	a := make([]float64, B)
	for _, members := range groupMembers(groups) {
		n := float64(len(members))
		mean := groupMean(s, members)
		for _, b := range members {
			a[b] = s[b]
			if n > 1 {
				a[b] = s[b]*n/(n-1) - mean*n/(n-1)
			}
		}
	}
	return broadcast(a, mask, B, T)
}

// OPOAdvantages is OPO's length-weighted baseline (veRL's compute_opo_outcome_advantage):
// b = sum(len_i*s_i)/sum(len_i) over the group, len the valid response tokens; 0 for a group
// of one, and for a group without valid tokens (veRL divides by zero). A = (s - b)*mask.
func OPOAdvantages(tokenRewards, mask []float32, B, T int, groups []string) (adv, returns []float32) {
	checkLen("tokenRewards", tokenRewards, B, T)
	checkLen("mask", mask, B, T)
	checkGroups(groups, B)
	s := sequenceScores(tokenRewards, B, T)
	lens := make([]float64, B)
	for i, m := range mask {
		lens[i/max(T, 1)] += float64(m)
	}
	a := make([]float64, B)
	for _, members := range groupMembers(groups) {
		bsl := 0.0
		if len(members) > 1 {
			num, den := 0.0, 0.0
			for _, b := range members {
				num += lens[b] * s[b]
				den += lens[b]
			}
			if den > 0 {
				bsl = num / den
			}
		}
		for _, b := range members {
			a[b] = s[b] - bsl
		}
	}
	return broadcast(a, mask, B, T)
}

// GRPOPassKAdvantages is the pass@k GRPO variant (veRL's compute_grpo_passk_outcome_advantage):
// in each group only the best response gets an advantage, r_max - r_second_max, divided by
// (std + 1e-6) with normByStd (sample std of the group). On a tie for the best, the first
// in batch order gets it. Every group needs at least two responses.
func GRPOPassKAdvantages(tokenRewards, mask []float32, B, T int, groups []string, normByStd bool) (adv, returns []float32, err error) {
	checkLen("tokenRewards", tokenRewards, B, T)
	checkLen("mask", mask, B, T)
	checkGroups(groups, B)
	s := sequenceScores(tokenRewards, B, T)
	a := make([]float64, B)
	for _, members := range groupMembers(groups) {
		if len(members) < 2 {
			return nil, nil, fmt.Errorf("algo: grpo_passk needs at least 2 responses per prompt, prompt %q has %d", groups[members[0]], len(members))
		}
		best := members[0]
		for _, b := range members[1:] {
			if s[b] > s[best] {
				best = b
			}
		}
		second := math.Inf(-1)
		for _, b := range members {
			if b != best && s[b] > second {
				second = s[b]
			}
		}
		v := s[best] - second
		if normByStd {
			mean := groupMean(s, members)
			ss := 0.0
			for _, b := range members {
				ss += (s[b] - mean) * (s[b] - mean)
			}
			v /= math.Sqrt(ss/float64(len(members)-1)) + GRPOEpsilon
		}
		a[best] = v
	}
	adv, returns = broadcast(a, mask, B, T)
	return adv, returns, nil
}

// GPGAdvantages is GPG (veRL's compute_gpg_outcome_advantage with f_norm = 1):
// A = alpha*(s - mean(group)), alpha = B / max(number of non-zero scores, 1), the mean 0 for
// a group of one; broadcast over the tokens times the mask.
func GPGAdvantages(tokenRewards, mask []float32, B, T int, groups []string) (adv, returns []float32) {
	adv, returns, _ = gpgAdvantages(tokenRewards, mask, B, T, groups, nil)
	return adv, returns
}

// gpgAdvantages is GPGAdvantages with B and the non-zero scores counted over the ranks by
// sum (Sum).
func gpgAdvantages(tokenRewards, mask []float32, B, T int, groups []string, sum Sum) (adv, returns []float32, err error) {
	checkLen("tokenRewards", tokenRewards, B, T)
	checkLen("mask", mask, B, T)
	checkGroups(groups, B)
	s := sequenceScores(tokenRewards, B, T)
	counts := []float64{float64(B), 0}
	for _, v := range s {
		if v != 0 {
			counts[1]++
		}
	}
	if sum != nil {
		if err := sum(counts); err != nil {
			return nil, nil, err
		}
	}
	alpha := counts[0] / max(counts[1], 1)
	a := make([]float64, B)
	for _, members := range groupMembers(groups) {
		mean := groupMean(s, members)
		for _, b := range members {
			a[b] = alpha * (s[b] - mean)
		}
	}
	adv, returns = broadcast(a, mask, B, T)
	return adv, returns, nil
}
