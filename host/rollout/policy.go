package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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
	// WeightVersion is the version of the weights that sampled the tokens, as an external
	// engine fleet counts them (Fleet.Sync: the training step whose weights it pushed last;
	// 0: the initial weights). The built-in engine always samples with the current weights
	// and leaves it 0.
	WeightVersion int
}

// Policy generates continuations. Implementations are safe for concurrent use: trajectories
// call Generate from their own goroutines and the policy batches them.
type Policy interface {
	Generate(ctx context.Context, prompt []int, p SamplingParams) (Generation, error)
}

// ModelPolicy serves Generate calls from many goroutines with one batched model generator
// (model.Generator.Stream): a call that arrives while others run joins them at the next decode
// step, finished sequences free their slots for waiting ones, and each call returns as soon
// as its own sequence finishes.
type ModelPolicy struct {
	m   *model.Model
	gen *model.Generator
	use sync.Mutex // the model runs one thing at a time: a generate stream or a TopLogprobs forward
	// waiting counts the lockModel callers waiting for use: the stream stops taking calls
	waiting atomic.Int32
	// feedHook, when set (tests), runs each time the stream looks for new calls
	feedHook atomic.Pointer[func()]
	reqs     chan *pending
	done     chan struct{}
	exited   chan struct{} // closed when the loop has returned: no call will be answered after it
	once     sync.Once
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
	p := &ModelPolicy{m: m, gen: g, reqs: make(chan *pending, 4096), done: make(chan struct{}),
		exited: make(chan struct{})}
	go p.loop()
	return p, nil
}

// SetDtype sets the weight type the generator computes with (actor_rollout_ref.rollout.dtype:
// auto, float32, bfloat16 or int8; model.Generator.SetDtypeName) and returns the type chosen.
// Call it before the first Generate.
func (p *ModelPolicy) SetDtype(name string) (cpu.Dtype, error) {
	return p.gen.SetDtypeName(name)
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
		return r.generation()
	case <-ctx.Done():
		return Generation{}, ctx.Err() // the batch finishes anyway; its result is dropped
	case <-p.exited:
		select { // answered just before the loop returned?
		case r := <-pd.out:
			return r.generation()
		default:
		}
		return Generation{}, ErrPolicyClosed
	}
}

func (r pendingResult) generation() (Generation, error) {
	if r.err != nil {
		return Generation{}, r.err
	}
	g := Generation{Tokens: make([]int, len(r.res.Tokens)), Logprobs: r.res.Logprobs, FinishReason: r.res.FinishReason}
	for i, t := range r.res.Tokens {
		g.Tokens[i] = int(t)
	}
	return g, nil
}

func (p *ModelPolicy) loop() {
	defer close(p.exited)
	for {
		var batch []*pending
		select {
		case <-p.done:
			return
		default:
		}
		select {
		case pd := <-p.reqs:
			batch = append(batch, pd)
		case <-p.done:
			return
		}
		// One stream serves this call and every call that arrives while it runs: a new call
		// joins at the next decode step and each call returns as soon as its own sequence
		// finishes, so a trajectory's next turn joins the same stream. The stream stops taking
		// calls while something else waits for the model (lockModel), and ends when idle.
		feed := func() []model.Request {
			if h := p.feedHook.Load(); h != nil {
				(*h)()
			}
			var reqs []model.Request
			for p.waiting.Load() == 0 {
				select {
				case pd := <-p.reqs:
					batch = append(batch, pd)
					reqs = append(reqs, pd.req)
				default:
					return reqs
				}
			}
			return reqs
		}
		first := append([]model.Request{batch[0].req}, feed()...)
		var answered []bool
		done := func(i int, res model.Result, err error) {
			for len(answered) <= i {
				answered = append(answered, false)
			}
			answered[i] = true
			if err != nil {
				batch[i].out <- pendingResult{err: fmt.Errorf("rollout: generate: %w", err)}
				return
			}
			p.mu.Lock()
			p.tokens += len(res.Tokens)
			p.mu.Unlock()
			batch[i].out <- pendingResult{res: res}
		}
		p.mu.Lock()
		p.batches++
		p.mu.Unlock()
		p.use.Lock()
		err := p.gen.Stream(first, feed, done)
		p.use.Unlock()
		for i, pd := range batch {
			if err != nil && (i >= len(answered) || !answered[i]) {
				pd.out <- pendingResult{err: fmt.Errorf("rollout: generate: %w", err)}
			}
		}
	}
}

// lockModel takes the model for something other than the generate stream: the stream
// stops taking new calls until it is released (unlockModel).
func (p *ModelPolicy) lockModel() {
	p.waiting.Add(1)
	p.use.Lock()
}

func (p *ModelPolicy) unlockModel() {
	p.use.Unlock()
	p.waiting.Add(-1)
}

// PrefixStats returns the prompt tokens the generator has run and those it copied from
// the cache of a prompt with the same prefix (GRPO's samples of a prompt, the next turn of
// a conversation), so far.
func (p *ModelPolicy) PrefixStats() (prefilled, shared int) {
	p.lockModel()
	defer p.unlockModel()
	return p.gen.PrefillTokens, p.gen.SharedTokens
}

// Stats returns the number of generate streams started (a stream serves every call that
// arrives while it runs) and the tokens generated so far.
func (p *ModelPolicy) Stats() (batches, tokens int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.batches, p.tokens
}

// Close stops the loop: a stream in progress finishes the calls it has taken; calls not taken
// by then, and later ones, return ErrPolicyClosed.
func (p *ModelPolicy) Close() { p.once.Do(func() { close(p.done) }) }
