//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// Overlap scheduling (overlap.go, gpu/model's Stream): a decode step is
// queued before the host reads the previous step's samples. Every
// request's tokens, log-probs and finish reason must be those of the steps
// run one after another, whether it ends by a stop token, its Stop func,
// MaxTokens or the end of its slot, and whether its slot is refilled.

// overlapRequests are 8 requests for the groups workload's model and
// generator (3 slots): the first 5 at once, the other 3 later; stop
// tokens, Stop funcs, lengths and one prompt that runs into the end of its
// slot (MaxT 40).
func overlapRequests() []model.Request {
	r := rand.New(rand.NewPCG(23, 23))
	tokens := func(n int) []int32 { return checkutil.GroupsTokens(r, n) }
	system := tokens(6)
	var reqs []model.Request
	for i := range 8 {
		s := checkutil.GroupsSample[i%2]
		s.Seed, s.MaxTokens, s.IgnoreEOS = uint64(500+i), 5+2*i, i%4 == 3
		switch i % 3 {
		case 0:
			s.StopTokens = tokens(6) // a few of 97: hit now and then
		case 1:
			s.Stop = func(t []int32) bool { return t[len(t)-1]%9 == 0 }
		}
		n := 8 + i
		if i == 5 {
			n, s.MaxTokens, s.StopTokens, s.Stop = 30, 20, nil, nil // ends at the slot's end
		}
		reqs = append(reqs, model.Request{Prompt: append(slices.Clone(system), tokens(n)...), Sample: s})
	}
	return reqs
}

// runOverlap generates overlapRequests on a fresh emulator with overlap
// scheduling on or off, then the three last requests' tool turns (their
// conversations' caches reused), and returns both rounds and the counts.
func runOverlap(t *testing.T, on bool, plant string) ([2]checkutil.GroupsRound, Counters, error) {
	be := openEmulator(t)
	be.SetDecodeOverlap(on)
	be.d.dl.plant = plant
	w := checkutil.NewGroupsWorkload()
	_, g, err := w.Generator(be)
	if err != nil {
		t.Fatal(err)
	}
	var rounds [2]checkutil.GroupsRound
	reqs := overlapRequests()
	c0 := be.Counters()
	if rounds[0], err = checkutil.Stream(g, reqs, 5, 3); err != nil {
		return rounds, Counters{}, err
	}
	c := be.Counters().Sub(c0)
	// the last three to finish hold their slots: each continues its conversation
	var turn []model.Request
	for _, i := range rounds[0].Order[len(reqs)-3:] {
		s := reqs[i].Sample
		s.MaxTokens, s.Seed = 3, 900+uint64(i)
		prompt := slices.Concat(reqs[i].Prompt, rounds[0].Results[i].Tokens, []int32{7, 8})
		if len(prompt) >= checkutil.GroupsMaxT {
			continue
		}
		turn = append(turn, model.Request{Prompt: prompt, Sample: s})
	}
	if rounds[1], err = checkutil.Stream(g, turn, len(turn), 0); err != nil {
		return rounds, c, err
	}
	return rounds, c, nil
}

func TestDecodeOverlapEmulator(t *testing.T) {
	off, coff, err := runOverlap(t, false, "")
	if err != nil {
		t.Fatal(err)
	}
	on, con, err := runOverlap(t, true, "")
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for n := range 2 {
		if len(on[n].Results) != len(off[n].Results) {
			t.Fatalf("round %d: %d results with overlap, %d without", n+1, len(on[n].Results), len(off[n].Results))
		}
		for i, x := range on[n].Results {
			y := off[n].Results[i]
			if !slices.Equal(x.Tokens, y.Tokens) || !slices.Equal(x.Logprobs, y.Logprobs) || x.FinishReason != y.FinishReason {
				t.Errorf("round %d request %d: %v %v %s with overlap, %v %v %s without", n+1, i,
					x.Tokens, x.Logprobs, x.FinishReason, y.Tokens, y.Logprobs, y.FinishReason)
			}
			if n == 0 {
				reqs := overlapRequests()
				why := y.FinishReason
				if why == "length" && len(y.Tokens) < reqs[i].Sample.MaxTokens {
					why = "end of slot"
				}
				reasons[why]++
			}
		}
	}
	t.Logf("round 1 finish reasons %v; shared prompt tokens %d/%d with overlap, %d/%d without", reasons,
		on[0].Share, on[1].Share, off[0].Share, off[1].Share)
	t.Logf("with overlap: %v", con)
	t.Logf("without:      %v", coff)
	if reasons["stop"] < 2 || reasons["length"] < 2 || reasons["end of slot"] != 1 {
		t.Errorf("finish reasons %v: the workload must end requests by stop tokens, lengths and the slot's end", reasons)
	}
	// the tool turn reuses its conversation's keys and values: the host's
	// record of a slot's tokens holds those forwarded before it read them
	// (a request that stopped may have forwarded its stop token too)
	if on[1].Share < off[1].Share || off[1].Share == 0 {
		t.Errorf("tool turn: %d prompt tokens shared with overlap, %d without", on[1].Share, off[1].Share)
	}
	if con.DownloadWaits == 0 || con.Syncs >= coff.Syncs || coff.DownloadWaits != 0 {
		t.Errorf("round 1: %d syncs and %d download waits with overlap, %d and %d without: want the samples read by waits",
			con.Syncs, con.DownloadWaits, coff.Syncs, coff.DownloadWaits)
	}
}

// TestDecodeOverlapPlantedOneSlot plants every download in one slot: the
// next step's copy lands before the host reads the previous samples.
func TestDecodeOverlapPlantedOneSlot(t *testing.T) {
	off, _, err := runOverlap(t, false, "")
	if err != nil {
		t.Fatal(err)
	}
	on, _, err := runOverlap(t, true, "oneslot")
	if err == nil {
		same := true
		for i, x := range on[0].Results {
			same = same && slices.Equal(x.Tokens, off[0].Results[i].Tokens) && slices.Equal(x.Logprobs, off[0].Results[i].Logprobs)
		}
		if same {
			t.Fatal("downloads planted in one slot: the same tokens and log-probs")
		}
		err = fmt.Errorf("tokens or log-probs differ")
	}
	t.Logf("planted: %v", err)
}

// TestDecodeOverlapEnv: RLHOST_CUDA_OVERLAP=0 switches it off when the device opens.
func TestDecodeOverlapEnv(t *testing.T) {
	for _, c := range []struct {
		v  string
		on bool
	}{{"", true}, {"1", true}, {"0", false}} {
		t.Setenv(OverlapEnv, c.v)
		be := openEmulator(t)
		if be.DecodeOverlap() != c.on {
			t.Errorf("%s=%q: overlap %v", OverlapEnv, c.v, be.DecodeOverlap())
		}
	}
	t.Setenv(OverlapEnv, "yes")
	if _, err := overlapOffFromEnv(); err == nil {
		t.Errorf("%s=yes: no error", OverlapEnv)
	}
}

// TestDownloadAbandoned: a download never waited for (a generator that
// stopped on an error) leaves its slot to the download 8 tickets later,
// which lands as it should; waiting for the abandoned ticket then is an
// error naming it.
func TestDownloadAbandoned(t *testing.T) {
	be := openEmulator(t)
	ids, lp := be.AllocInt32("ids", 4), be.Alloc("log-probs", 4)
	be.UploadInt32(ids, []int32{1, 2, 3, 4})
	be.Upload(lp, []float32{-1, -2, -3, -4})
	first := be.DownloadQueued(ids, lp, 4)
	var last int
	for range downloadSlots {
		last = be.DownloadQueued(ids, lp, 4)
	}
	got, gotLp := make([]int32, 4), make([]float32, 4)
	be.WaitDownload(last, got, gotLp)
	if !slices.Equal(got, []int32{1, 2, 3, 4}) || !slices.Equal(gotLp, []float32{-1, -2, -3, -4}) {
		t.Errorf("download %d: %v %v", last, got, gotLp)
	}
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), fmt.Sprintf("download %d is not in flight", first)) {
			t.Errorf("waiting for the abandoned download %d: %v", first, r)
		}
	}()
	be.WaitDownload(first, got, gotLp)
}
