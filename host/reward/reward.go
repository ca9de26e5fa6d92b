package reward

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/rlhost/rlhost/sdk/suggest"
	"github.com/rlhost/rlhost/sdk/task"
)

// Scorer scores a batch of responses; a task plugin (*host/plugin.Task, sdk task.Task)
// satisfies it.
type Scorer interface {
	Score(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error)
}

// Item is one response to score.
type Item struct {
	task.ScoreItem
	// ResponseLength is the response's length in tokens, for the overlong penalty. veRL counts
	// every non-padding response token, tool and user tokens of a multi-turn response included.
	ResponseLength int
}

// Result is the reward of one item.
type Result struct {
	// Score is the scalar reward: the task's score, or the weighted sum of its components
	// (Config.Weights), plus the overlong penalty. 0 when the item could not be scored.
	Score float64
	// Components are the task's reward components, all of them, weighted or not.
	Components map[string]float64
	// Extra holds the task's extra fields, and "overlong_reward" (float64) and "overlong"
	// (bool) when the overlong penalty is on.
	Extra map[string]any
	// Err says why the item could not be scored (the task's per-item error, a failed call,
	// a timeout); empty when it was.
	Err string
	// TimedOut: the Score call of this item ran out of time.
	TimedOut bool
}

// Stats counts the outcomes of one Manager.Score call.
type Stats struct {
	Scored   int // items with a score
	Errors   int // items that scored 0 because of an error (timeouts excluded)
	Timeouts int // items that scored 0 because their call timed out
	Elapsed  time.Duration
}

// Manager scores a batch of items with a Scorer. It returns one Result per item, in order.
// Items that cannot be scored get 0 and an Err, and are counted in Stats; the returned error
// is non-nil only when ctx ends (or the arguments are invalid).
type Manager interface {
	Score(ctx context.Context, s Scorer, items []Item) ([]Result, Stats, error)
}

// The manager kinds (reward_model.reward_manager).
const (
	Naive    = "naive"    // one Score call per item, one after the other
	Batch    = "batch"    // one Score call for the whole batch
	Parallel = "parallel" // one Score call per item on a pool of Workers, each with Timeout
	DAPO     = "dapo"     // naive, with the overlong penalty when Overlong.Enable
)

// Kinds lists the manager kinds.
var Kinds = []string{Naive, Batch, Parallel, DAPO}

// DefaultWorkers and DefaultParallelTimeout are the parallel manager's defaults (veRL's
// prime manager uses a 300 s per-sample timeout).
const (
	DefaultWorkers         = 8
	DefaultParallelTimeout = 300 * time.Second
)

// Config configures a Manager.
type Config struct {
	Kind string
	// Workers: concurrent Score calls of the parallel manager; 0 means DefaultWorkers.
	Workers int
	// Timeout bounds every Score call: per item for naive, dapo and parallel, for the whole
	// batch for batch. 0 means none, except for parallel (DefaultParallelTimeout).
	Timeout time.Duration
	// Overlong is DAPO's soft overlong punishment; it applies to any kind when enabled.
	Overlong Overlong
	// Weights, when not empty, turns a result's Components into its Score: the sum of
	// w_k * c_k over the weighted names present in Components. Components without a weight
	// do not count (but are kept in Result.Components); a result without components keeps
	// the task's Score.
	Weights map[string]float64
}

// Overlong is the overlong penalty of DAPO (reward_model.overlong_buffer):
// min(-(len - (MaxLen - Buffer)) / Buffer * PenaltyFactor, 0), added to the score.
type Overlong struct {
	Enable        bool
	MaxLen        int // the maximum response length (data.max_response_length)
	Buffer        int // the length of the penalty ramp before MaxLen (overlong_buffer.len)
	PenaltyFactor float64
}

// Penalty is the overlong penalty of a response of length tokens: 0 up to MaxLen-Buffer,
// then falling linearly to -PenaltyFactor at MaxLen (and further beyond it). 0 when not
// enabled.
func (o Overlong) Penalty(length int) float64 {
	if !o.Enable {
		return 0
	}
	exceed := float64(length - (o.MaxLen - o.Buffer))
	return math.Min(-exceed/float64(o.Buffer)*o.PenaltyFactor, 0)
}

// Check validates the configuration.
func (c Config) Check() error {
	known := false
	for _, k := range Kinds {
		known = known || k == c.Kind
	}
	if !known {
		msg := fmt.Sprintf("reward: unknown reward manager %q (want one of %v)", c.Kind, Kinds)
		if s := suggest.Closest(c.Kind, Kinds); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return errors.New(msg)
	}
	if c.Workers < 0 {
		return fmt.Errorf("reward: workers = %d, want >= 0", c.Workers)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("reward: timeout = %v, want >= 0", c.Timeout)
	}
	if o := c.Overlong; o.Enable {
		if o.Buffer <= 0 {
			return fmt.Errorf("reward: overlong buffer length = %d, want > 0", o.Buffer)
		}
		if o.MaxLen < o.Buffer {
			return fmt.Errorf("reward: overlong buffer length %d exceeds the maximum response length %d", o.Buffer, o.MaxLen)
		}
		if o.PenaltyFactor < 0 || math.IsNaN(o.PenaltyFactor) || math.IsInf(o.PenaltyFactor, 0) {
			return fmt.Errorf("reward: overlong penalty factor = %g, want a finite number >= 0", o.PenaltyFactor)
		}
	}
	names := make([]string, 0, len(c.Weights))
	for k := range c.Weights {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if w := c.Weights[k]; math.IsNaN(w) || math.IsInf(w, 0) {
			return fmt.Errorf("reward: weight of component %q is %g, want a finite number", k, w)
		}
	}
	return nil
}

// New returns the manager cfg describes.
func New(cfg Config) (Manager, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	m := &manager{cfg: cfg}
	if cfg.Kind == Parallel {
		if m.cfg.Workers == 0 {
			m.cfg.Workers = DefaultWorkers
		}
		if m.cfg.Timeout == 0 {
			m.cfg.Timeout = DefaultParallelTimeout
		}
	}
	return m, nil
}

type manager struct{ cfg Config }

func (m *manager) Score(ctx context.Context, s Scorer, items []Item) ([]Result, Stats, error) {
	start := time.Now()
	if s == nil {
		return nil, Stats{}, errors.New("reward: no scorer")
	}
	results := make([]Result, len(items))
	var err error
	switch m.cfg.Kind {
	case Batch:
		if len(items) > 0 {
			err = m.scoreChunk(ctx, s, items, results)
		}
	case Parallel:
		err = m.scoreParallel(ctx, s, items, results)
	default: // naive, dapo
		for i := range items {
			if err = m.scoreChunk(ctx, s, items[i:i+1], results[i:i+1]); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, Stats{}, err
	}
	var st Stats
	for _, r := range results {
		switch {
		case r.TimedOut:
			st.Timeouts++
		case r.Err != "":
			st.Errors++
		default:
			st.Scored++
		}
	}
	st.Elapsed = time.Since(start)
	return results, st, nil
}

func (m *manager) scoreParallel(ctx context.Context, s Scorer, items []Item, results []Result) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	workers := min(m.cfg.Workers, len(items))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := m.scoreChunk(ctx, s, items[i:i+1], results[i:i+1]); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := range items {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// scoreChunk scores items with one Score call (retried once if the call fails as a whole)
// and fills results. It returns an error only when ctx ends.
func (m *manager) scoreChunk(ctx context.Context, s Scorer, items []Item, results []Result) error {
	req := make([]task.ScoreItem, len(items))
	for i, it := range items {
		req[i] = it.ScoreItem
	}
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		res, timedOut, err := m.call(ctx, s, req)
		if ctx.Err() != nil {
			return fmt.Errorf("reward: scoring stopped: %w", ctx.Err())
		}
		if timedOut {
			msg := fmt.Sprintf("reward: Score timed out after %v", m.cfg.Timeout)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				msg = "reward: " + err.Error() // the scorer's own account (a plugin's names it, the call and the time)
			}
			for i := range results {
				results[i] = Result{Score: 0, TimedOut: true, Err: msg}
			}
			return nil
		}
		if err == nil {
			for i, r := range res {
				results[i] = m.result(r, items[i])
			}
			return nil
		}
		lastErr = err
	}
	for i := range results {
		results[i] = Result{Err: fmt.Sprintf("reward: Score failed twice: %v", lastErr)}
	}
	return nil
}

// call makes one Score call bounded by the timeout. It returns when the timeout or ctx ends
// even if the scorer does not (its goroutine then finishes on its own), and turns a panic of
// an in-process scorer into an error.
func (m *manager) call(ctx context.Context, s Scorer, items []task.ScoreItem) (res []task.ScoreResult, timedOut bool, err error) {
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if m.cfg.Timeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, m.cfg.Timeout)
	}
	defer cancel()
	type reply struct {
		res []task.ScoreResult
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- reply{err: fmt.Errorf("scorer panicked: %v", p)}
			}
		}()
		r, err := s.Score(cctx, items)
		ch <- reply{r, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
				return nil, true, r.err
			}
			return nil, false, r.err
		}
		if len(r.res) != len(items) {
			return nil, false, fmt.Errorf("scorer returned %d results for %d items", len(r.res), len(items))
		}
		return r.res, false, nil
	case <-cctx.Done():
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		// A scorer that honours its context (a plugin does) answers at once with its own
		// account of the timeout; wait a moment for it.
		select {
		case r := <-ch:
			if r.err != nil {
				return nil, true, r.err
			}
		case <-time.After(timeoutGrace):
		}
		return nil, true, cctx.Err()
	}
}

// timeoutGrace is how long a timed-out Score call's own error is waited for.
const timeoutGrace = time.Second

// result turns the task's result into a Result: weights, checks, overlong penalty.
func (m *manager) result(r task.ScoreResult, it Item) Result {
	out := Result{Components: r.Components, Extra: r.Extra}
	if r.Err != "" {
		out.Err = r.Err
		return out
	}
	if err := FiniteComponents(r.Components); err != nil {
		out.Err = err.Error()
		return out
	}
	score := r.Score
	if len(m.cfg.Weights) > 0 && len(r.Components) > 0 {
		score = 0
		for k, w := range m.cfg.Weights {
			if c, ok := r.Components[k]; ok {
				score += w * c
			}
		}
	}
	if math.IsNaN(score) || math.IsInf(score, 0) {
		out.Err = fmt.Sprintf("reward: the task scored %g", score)
		return out
	}
	if m.cfg.Overlong.Enable {
		p := m.cfg.Overlong.Penalty(it.ResponseLength)
		score += p
		extra := make(map[string]any, len(r.Extra)+2)
		for k, v := range r.Extra {
			extra[k] = v
		}
		extra["overlong_reward"] = p
		extra["overlong"] = p < 0 // as veRL logs it
		out.Extra = extra
	}
	out.Score = score
	return out
}

// FiniteComponents fails components of which one is NaN or infinite, naming it: such a
// reward cannot be trained on, nor averaged into the step's metrics.
func FiniteComponents(c map[string]float64) error {
	names := make([]string, 0, len(c))
	for k, v := range c {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return fmt.Errorf("reward: the task's reward component %q is %g", names[0], c[names[0]])
}

// PlaceOnLastToken spreads one scalar per sequence over a [B*T] token-reward matrix: the
// score of sequence b goes on its last token with mask 1 (a model token; tool and user
// tokens after it are skipped), every other element is 0. A sequence without a valid token
// gets its score at t=0, so that sums over the row (GRPO) still see it while masked losses
// ignore it.
//
//	scores [B]; mask [B*T]
func PlaceOnLastToken(scores []float64, mask []float32, B, T int) []float32 {
	if len(scores) != B || len(mask) != B*T {
		panic(fmt.Sprintf("reward: PlaceOnLastToken: %d scores and %d mask elements for B=%d T=%d", len(scores), len(mask), B, T))
	}
	out := make([]float32, B*T)
	if T == 0 {
		return out
	}
	for b := 0; b < B; b++ {
		last := 0
		for t := T - 1; t >= 0; t-- {
			if mask[b*T+t] != 0 {
				last = t
				break
			}
		}
		out[b*T+last] = float32(scores[b])
	}
	return out
}
