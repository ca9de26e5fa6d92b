package cudacheck

import (
	"fmt"
	"slices"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// graphDevice is a device with decode graphs (*Backend).
type graphDevice interface {
	gpu.DecodeGraph
	SetDecodeGraphs(on bool)
	GraphStats() cuda.GraphStats
}

// CheckDecodeGraph: the groups workload (a GRPO rollout with a tool turn:
// slots refilled, shared prefixes, caches appended to) on the device with
// decode graphs (graph.go) gives the tokens of the same device without
// them, and log-probs within 1e-5 (the same kernels with the same
// arguments: the emulator's are the same bit for bit), with decode steps
// replayed as graphs. A device without graphs (the CPU reference) passes.
func CheckDecodeGraph(b Device) error {
	gb, ok := b.(graphDevice)
	if !ok {
		return nil
	}
	on := gb.DecodeGraphs()
	defer gb.SetDecodeGraphs(on)
	w := checkutil.NewGroupsWorkload()
	var rounds [2][2]checkutil.GroupsRound
	var st0, st cuda.GraphStats
	for k, graphs := range []bool{false, true} {
		gb.SetDecodeGraphs(graphs)
		st0 = gb.GraphStats()
		_, g, err := w.Generator(b)
		if err != nil {
			return err
		}
		if rounds[k], err = w.Run(g); err != nil {
			return fmt.Errorf("generate with graphs %v: %w", graphs, err)
		}
		st = gb.GraphStats()
	}
	for n := range 2 {
		want, got := rounds[0][n], rounds[1][n]
		for i := range want.Results {
			if !slices.Equal(got.Results[i].Tokens, want.Results[i].Tokens) {
				return fmt.Errorf("round %d request %d: tokens %v with decode graphs, %v without", n+1, i, got.Results[i].Tokens, want.Results[i].Tokens)
			}
			if err := checkutil.Compare(fmt.Sprintf("round %d request %d logprobs (with decode graphs; without in the place of cpu)", n+1, i),
				got.Results[i].Logprobs, want.Results[i].Logprobs, 1e-5); err != nil {
				return err
			}
		}
	}
	if st.Replays == st0.Replays {
		return fmt.Errorf("no decode step replayed as a graph (%+v)", st)
	}
	return nil
}
