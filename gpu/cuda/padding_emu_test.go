//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// paddingSlots is the generator of TestDecodePaddingEmulator: 12 slots,
// whose decode steps are padded to 12, 8, 4, 2 or 1 rows
// (model.Generator's decodeBucket), over 40 positions.
const paddingSlots, paddingMaxT = 12, 40

// paddingRequests are paddingSlots requests of 3 to 6 prompt tokens,
// request i generating 2*(paddingSlots-i) tokens: admitted together, the
// batch shrinks by one row every 2 decode steps, through every size from
// 12 to 1, request 0 (slot 0) running to the end.
func paddingRequests(r *rand.Rand, c model.Config, sampled bool) []model.Request {
	var reqs []model.Request
	for i := range paddingSlots {
		prompt := make([]int32, 3+r.IntN(4))
		for j := range prompt {
			prompt[j] = int32(3 + r.IntN(c.V-3))
		}
		sc := model.SampleConfig{MaxTokens: 2 * (paddingSlots - i), IgnoreEOS: true, Seed: uint64(31 + i)}
		if sampled {
			sc.Temperature, sc.TopK, sc.TopP = 0.9, 20, 0.9
		}
		reqs = append(reqs, model.Request{Prompt: prompt, Sample: sc})
	}
	return reqs
}

// paddingRun generates paddingRequests on a fresh emulator in precision p
// with decode graphs on (the decode steps padded) or off (not padded),
// with the padding's defect plant planted (model.PlantDecodePadding).
func paddingRun(t *testing.T, c model.Config, p Precision, sampled, on bool, plant string) ([][]model.Result, GraphStats, Counters) {
	t.Helper()
	model.PlantDecodePadding = plant
	defer func() { model.PlantDecodePadding = "" }()
	be := openEmulator(t)
	be.SetDecodeGraphs(on)
	be.SetPrecision(p)
	r := rand.New(rand.NewPCG(41, 3))
	m := model.NewZero(be, c)
	m.Params.Upload(checkutil.Randn(r, c.NumParams(), 0.3))
	g, err := m.NewGenerator(paddingSlots, paddingMaxT)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Generate(paddingRequests(r, c, sampled))
	if err != nil {
		t.Fatal(err)
	}
	return [][]model.Result{res}, be.GraphStats(), be.Counters()
}

// paddingRows is the rows that pad paddingRequests' decode steps: decode
// step k (1 to 23; request 0's first token is the prefill's) has the rows
// of the requests of more than k tokens, padded to 12, 8, 4, 2 or 1.
func paddingRows() (rows int64) {
	for k := 1; k < 2*paddingSlots; k++ {
		n := 0
		for i := range paddingSlots {
			if 2*(paddingSlots-i) > k {
				n++
			}
		}
		b := paddingSlots
		for _, s := range []int{1, 2, 4, 8} {
			if n <= s {
				b = s
				break
			}
		}
		rows += int64(b - n)
	}
	return rows
}

// TestDecodePaddingEmulator: a batch that shrinks one row at a time
// through 12 sizes, its decode steps padded to the 5 buckets' sizes (12,
// 8, 4, 2, 1) with decode graphs on, gives the tokens and log-probs of
// the same generation with graphs off (every step eager, unpadded), bit
// for bit, greedy and sampled, fp32 and bf16; it captures at most one
// graph a bucket (unpadded, each of the 12 sizes would come twice in a
// row, be captured and never replayed) and replays the rest. A planted
// defect makes the results differ: the padding written to slot 0 (a
// request's first prompt token), or the padding's logits sampled for the
// real rows. The padding's cost in transfers: its rows' ids, positions,
// slots, cache rows and selected rows go up with the step's (20 B a row,
// in the same copies), nothing more.
func TestDecodePaddingEmulator(t *testing.T) {
	c := decodeQwenConfig(2)
	// the real rows' results do not depend on the rows beside them here:
	// flash-decoding splits the cache into the same chunks at every batch
	// size of the generator (on a GPU the chunks, and cuBLAS's choice of
	// kernel, may change with the batch; a row's result is then within the
	// rounding of another order of the sums, padded or not)
	L0, ch0 := decodeChunks(decodeRows(1, c.NH, c.NKV, c.HD), paddingMaxT, decodeSMs)
	for n := 2; n <= paddingSlots; n++ {
		if L, ch := decodeChunks(decodeRows(n, c.NH, c.NKV, c.HD), paddingMaxT, decodeSMs); L != L0 || ch != ch0 {
			t.Fatalf("batch %d: %d chunks of %d positions, batch 1 %d of %d", n, ch, L, ch0, L0)
		}
	}
	const buckets = 5 // 12, 8, 4, 2, 1
	for _, s := range []struct {
		p       Precision
		sampled bool
	}{{FP32, false}, {BF16, true}} {
		name := fmt.Sprintf("%s sampled=%v", s.p, s.sampled)
		eager, st0, c0 := paddingRun(t, c, s.p, s.sampled, false, "")
		graph, st, c1 := paddingRun(t, c, s.p, s.sampled, true, "")
		if d := graphDiff(graph, eager); d != "" {
			t.Errorf("%s: padded, with graphs %s", name, d)
		}
		t.Logf("%s: graphs off %+v, on (padded, %d padding rows in all) %+v", name, st0, paddingRows(), st)
		if st.Captures > buckets || st.Captures < buckets-1 || st.Replays < st.Captures || st.Mismatches != 0 || st.Aborts != 0 {
			t.Errorf("%s: %+v: want %d captures at most (one a bucket), more replays, no mismatch", name, st, buckets)
		}
		// request 0's tokens but its first (the prefill's): every decode
		// step a region; none marked with graphs off
		if decode := st.Captures + st.Replays + st.Eager; decode != 2*paddingSlots-1 || st0 != (GraphStats{}) {
			t.Errorf("%s: %d decode steps, want %d; graphs off %+v", name, decode, 2*paddingSlots-1, st0)
		}
		if up, want := c1.HostToDevice-c0.HostToDevice, 20*paddingRows(); up != want || c1.Uploads != c0.Uploads ||
			c1.DeviceToHost != c0.DeviceToHost || c1.Downloads != c0.Downloads || c1.Syncs != c0.Syncs {
			t.Errorf("%s: padded %v, unpadded %v: want %d B more up (20 B for each of %d padding rows), the same copies and syncs",
				name, c1, c0, want, paddingRows())
		}
		for _, plant := range []string{"slot0", "tail"} {
			bad, _, _ := paddingRun(t, c, s.p, s.sampled, true, plant)
			if d := graphDiff(bad, eager); d == "" {
				t.Errorf("%s: the results are the same with the defect %q planted in the padding", name, plant)
			} else {
				t.Logf("%s, %q planted: %.120s", name, plant, d)
			}
		}
	}
}
