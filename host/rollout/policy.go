package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
)

// SamplingParams controls one generate call.
type SamplingParams struct {
	MaxTokens   int
	Temperature float64 // 0: greedy
	TopP        float64 // 0 or 1: off
	TopK        int     // <= 0: off
	Seed        uint64  // the random stream of this call (derive it from the trajectory and turn)
}

// Generation is the result of one generate call.
type Generation struct {
	Tokens       []int
	Logprobs     []float32 // log-probability of each token under the sampling distribution
	FinishReason string    // "stop" or "length"
}

// Policy generates continuations. Implementations are safe for concurrent use: trajectories
// call Generate from their own goroutines and the policy batches them.
type Policy interface {
	Generate(ctx context.Context, prompt []int, p SamplingParams) (Generation, error)
}

// ModelPolicy serves Generate calls from many goroutines with one batched model generator: calls
// that arrive while a batch runs are collected and run together as the next batch (inside a
// batch, finished sequences free their slots for waiting ones).
type ModelPolicy struct {
	m    *model.Model
	gen  *model.Generator
	use  sync.Mutex // the model runs one thing at a time: a generate batch or a TopLogprobs forward
	reqs chan *pending
	done chan struct{}
	once sync.Once
	// Stats
	mu      sync.Mutex
	batches int
	tokens  int
}

type pending struct {
	req model.Request
	out chan pendingResult
}

type pendingResult struct {
	res model.Result
	err error
}

// NewModelPolicy starts the batching loop over a generator of slots sequences of up to maxT
// tokens (prompt included).
func NewModelPolicy(m *model.Model, slots, maxT int) (*ModelPolicy, error) {
	g, err := m.NewGenerator(slots, maxT)
	if err != nil {
		return nil, err
	}
	p := &ModelPolicy{m: m, gen: g, reqs: make(chan *pending, 4096), done: make(chan struct{})}
	go p.loop()
	return p, nil
}

// SetDtype sets the weight type the generator computes with (actor_rollout_ref.rollout.dtype:
// float32, bfloat16 or int8; model.Generator.SetDtype). Call it before the first Generate.
func (p *ModelPolicy) SetDtype(name string) error {
	d, err := cpu.ParseDtype(name)
	if err != nil {
		return err
	}
	return p.gen.SetDtype(d)
}

// ErrPolicyClosed is returned by Generate after Close.
var ErrPolicyClosed = errors.New("rollout: policy closed")

// Generate implements Policy.
func (p *ModelPolicy) Generate(ctx context.Context, prompt []int, sp SamplingParams) (Generation, error) {
	if sp.MaxTokens <= 0 {
		return Generation{FinishReason: "length"}, nil
	}
	pr := make([]int32, len(prompt))
	for i, t := range prompt {
		pr[i] = int32(t)
	}
	pd := &pending{req: model.Request{Prompt: pr, Sample: model.SampleConfig{MaxTokens: sp.MaxTokens,
		Temperature: float32(sp.Temperature), TopP: float32(sp.TopP), TopK: max(sp.TopK, 0), Seed: sp.Seed}},
		out: make(chan pendingResult, 1)}
	select {
	case p.reqs <- pd:
	case <-p.done:
		return Generation{}, ErrPolicyClosed
	case <-ctx.Done():
		return Generation{}, ctx.Err()
	}
	select {
	case r := <-pd.out:
		if r.err != nil {
			return Generation{}, r.err
		}
		g := Generation{Tokens: make([]int, len(r.res.Tokens)), Logprobs: r.res.Logprobs, FinishReason: r.res.FinishReason}
		for i, t := range r.res.Tokens {
			g.Tokens[i] = int(t)
		}
		return g, nil
	case <-ctx.Done():
		return Generation{}, ctx.Err() // the batch finishes anyway; its result is dropped
	}
}

func (p *ModelPolicy) loop() {
	for {
		var batch []*pending
		select {
		case pd := <-p.reqs:
			batch = append(batch, pd)
		case <-p.done:
			return
		}
	drain:
		for {
			select {
			case pd := <-p.reqs:
				batch = append(batch, pd)
			default:
				break drain
			}
		}
		reqs := make([]model.Request, len(batch))
		for i, pd := range batch {
			reqs[i] = pd.req
		}
		p.use.Lock()
		res, err := p.gen.Generate(reqs)
		p.use.Unlock()
		if err != nil && len(batch) > 1 {
			// One bad request must not fail the others: run them one by one.
			for _, pd := range batch {
				p.use.Lock()
				r, err := p.gen.Generate([]model.Request{pd.req})
				p.use.Unlock()
				if err != nil {
					pd.out <- pendingResult{err: fmt.Errorf("rollout: generate: %w", err)}
				} else {
					pd.out <- pendingResult{res: r[0]}
				}
			}
			continue
		}
		n := 0
		for i, pd := range batch {
			if err != nil {
				pd.out <- pendingResult{err: fmt.Errorf("rollout: generate: %w", err)}
				continue
			}
			n += len(res[i].Tokens)
			pd.out <- pendingResult{res: res[i]}
		}
		p.mu.Lock()
		p.batches++
		p.tokens += n
		p.mu.Unlock()
	}
}

// PrefixStats returns the prompt tokens the generator has run and those it copied from
// the cache of a prompt with the same prefix (GRPO's samples of a prompt, the next turn of
// a conversation), so far.
func (p *ModelPolicy) PrefixStats() (prefilled, shared int) {
	p.use.Lock()
	defer p.use.Unlock()
	return p.gen.PrefillTokens, p.gen.SharedTokens
}

// Stats returns the number of batches run and tokens generated so far.
func (p *ModelPolicy) Stats() (batches, tokens int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.batches, p.tokens
}

// Close stops the loop; a batch in progress finishes first.
func (p *ModelPolicy) Close() { p.once.Do(func() { close(p.done) }) }
