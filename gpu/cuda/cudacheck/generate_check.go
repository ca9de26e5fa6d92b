package cudacheck

// The generation check of a GRPO rollout with a tool turn: groups of samples
// of a prompt, more requests than slots (continuous batching through
// model.Generator.Stream with a feed), prefix sharing within a group, and a
// second round whose prompts extend the first round's conversations.

import (
	"fmt"
	"slices"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// CheckGenerateGroups: a GRPO rollout with a tool turn (groupsWorkload) on the
// device and on the CPU must give the same tokens, log-probs within 1e-4,
// and the same prompt tokens prefilled and shared in each round, with
// prompt tokens shared in both (the samples of a group copy their prompt's
// keys and values; a tool turn reuses its conversation's cache), so that
// the check fails if prefix sharing silently stops or copies the wrong
// keys and values.
func CheckGenerateGroups(b Device) error {
	w := checkutil.NewGroupsWorkload()
	var rounds [2][2]checkutil.GroupsRound
	for k, be := range []gpu.Backend{checkutil.Ref, b} {
		_, g, err := w.Generator(be)
		if err != nil {
			return err
		}
		if rounds[k], err = w.Run(g); err != nil {
			return fmt.Errorf("generate on %s: %w", be.Name(), err)
		}
	}
	for n := range 2 {
		want, got := rounds[0][n], rounds[1][n]
		for i := range want.Results {
			if !slices.Equal(got.Results[i].Tokens, want.Results[i].Tokens) {
				return fmt.Errorf("round %d request %d: tokens %v on cuda, %v on cpu", n+1, i, got.Results[i].Tokens, want.Results[i].Tokens)
			}
			if err := checkutil.Compare(fmt.Sprintf("round %d request %d logprobs", n+1, i), got.Results[i].Logprobs, want.Results[i].Logprobs, 1e-4); err != nil {
				return err
			}
		}
		if got.Prefill != want.Prefill || got.Share != want.Share {
			return fmt.Errorf("round %d: %d prompt tokens prefilled and %d shared on cuda, %d and %d on cpu", n+1, got.Prefill, got.Share, want.Prefill, want.Share)
		}
		if want.Share == 0 {
			return fmt.Errorf("round %d: no prompt token shared (%d prefilled) on cuda and cpu: prefix sharing is off", n+1, want.Prefill)
		}
	}
	return nil
}
