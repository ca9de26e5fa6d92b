package rollout

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/weights"
)

func tinyPolicy(t *testing.T, slots int) *ModelPolicy {
	t.Helper()
	ck, err := weights.Load(filepath.Join("..", "..", "gpu", "model", "testdata", "tiny-llama"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cpu.New(), ck)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewModelPolicy(m, slots, 128)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A call that arrives while another generates joins its stream (one stream serves both), with
// the tokens it gives alone; a TopLogprobs call while the stream runs is served (the stream
// stops taking calls and ends).
func TestModelPolicyJoinsRunningStream(t *testing.T) {
	p := tinyPolicy(t, 4)
	ctx := context.Background()
	long := SamplingParams{MaxTokens: 100, Temperature: 1, Seed: 3}
	short := SamplingParams{MaxTokens: 3, Temperature: 1, Seed: 4}
	longPrompt, shortPrompt := []int{5, 6, 7, 8}, []int{9, 10}
	aloneLong, err := p.Generate(ctx, longPrompt, long)
	if err != nil || len(aloneLong.Tokens) != 100 {
		t.Fatalf("long request alone: %d tokens (%v), want 100 (pick a seed without eos)", len(aloneLong.Tokens), err)
	}
	aloneShort, err := p.Generate(ctx, shortPrompt, short)
	if err != nil {
		t.Fatal(err)
	}
	p.lockModel() // the last stream has ended (a call now starts a new one)
	b0, _ := p.Stats()
	p.unlockModel()

	// the stream's 5th look for new calls (4 decode steps into the long request) waits until
	// the short call is queued
	feeds := 0
	atStep := make(chan struct{})
	hook := func() {
		if feeds++; feeds != 5 {
			return
		}
		close(atStep)
		for deadline := time.Now().Add(10 * time.Second); len(p.reqs) == 0 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
	}
	p.feedHook.Store(&hook)
	var longDone sync.WaitGroup
	longDone.Add(1)
	var gotLong Generation
	var longErr error
	finished := make(chan struct{})
	go func() {
		defer longDone.Done()
		gotLong, longErr = p.Generate(ctx, longPrompt, long)
		close(finished)
	}()
	select {
	case <-atStep:
	case <-finished:
		t.Fatal("the long request finished without looking for new calls 5 times")
	}
	gotShort, err := p.Generate(ctx, shortPrompt, short)
	if err != nil {
		t.Fatal(err)
	}
	tops, err := p.TopLogprobs(ctx, shortPrompt, gotShort.Tokens, 2, 1)
	if err != nil || len(tops) != len(gotShort.Tokens) {
		t.Fatalf("TopLogprobs during the stream: %v, %d positions", err, len(tops))
	}
	longDone.Wait()
	if longErr != nil {
		t.Fatal(longErr)
	}
	if !slices.Equal(gotShort.Tokens, aloneShort.Tokens) || !slices.Equal(gotLong.Tokens, aloneLong.Tokens) {
		t.Errorf("joined calls gave other tokens than alone: short %v / %v, long equal %v", gotShort.Tokens, aloneShort.Tokens, slices.Equal(gotLong.Tokens, aloneLong.Tokens))
	}
	// the short call was queued while the long one's stream ran (feedHook): one stream served both
	if b1, _ := p.Stats(); b1-b0 != 1 {
		t.Errorf("%d streams for 2 overlapping calls: the second did not join the running stream", b1-b0)
	}
}

// Calls made around Close never hang: each gets its generation or ErrPolicyClosed.
func TestModelPolicyCloseAnswersEveryCall(t *testing.T) {
	p := tinyPolicy(t, 2)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.Generate(ctx, []int{5, 6, 7}, SamplingParams{MaxTokens: 20, Temperature: 1, Seed: uint64(i)})
			errs <- err
		}()
		if i == 10 {
			p.Close()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("calls made around Close are still waiting after 60 s")
	}
	close(errs)
	for err := range errs {
		if err != nil && err != ErrPolicyClosed {
			t.Errorf("Generate around Close: %v", err)
		}
	}
}
