package rollout

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"
)

// Fleet is a Policy served by several external engines of one protocol (the comma-separated
// actor_rollout_ref.rollout.engine.base_url; docs/engines.md). Each call goes to one engine:
//
//   - by prompt: the calls of a prompt (a GRPO group, the turns of a conversation) prefer the
//     same engine, whose prefix cache then holds the prompt, unless that engine has more than
//     FleetSlack calls in flight beyond the least busy one, which then takes the call;
//   - a call that fails on an engine (after that engine's own retries) is sent to the next
//     one, and the failed engine is taken out for a cooldown (FleetCooldown, doubling with
//     each failure in a row, at most FleetMaxCooldown); when every engine is out, the one
//     whose cooldown ends first is tried again, so an engine that comes back is used again;
//   - with weights pushed after each step (Sync), an engine whose reload failed keeps the old
//     weights: it takes no call until a later Sync reaches it, so rollouts stay on-policy.
//
// Every Generation carries the fleet's weight version of the engine that sampled it; a call
// sampled under an older version than the current one is counted (FleetStats.Stale).
type Fleet struct {
	members []*fleetMember

	mu      sync.Mutex
	version int  // the weights' version the trainer last pushed (Sync), 0 = the initial weights
	pushed  bool // Sync has pushed weights: engines without the current version are out
	stats   FleetStats
	now     func() time.Time
}

// Fleet tuning: how far an engine may be busier than the least busy one before a prompt's
// calls leave it, and the cooldown of an engine that failed.
const (
	FleetSlack       = 2
	FleetCooldown    = 5 * time.Second
	FleetMaxCooldown = 5 * time.Minute
)

type fleetMember struct {
	e         *EnginePolicy
	inFlight  int
	served    int
	fails     int       // failures in a row
	downUntil time.Time // out until then
	version   int       // the weights' version this engine holds
	lastErr   error
}

// FleetStats counts what a Fleet saw since it was made.
type FleetStats struct {
	Generations int // calls answered
	Stale       int // answered by an engine holding older weights than the current version
	Failovers   int // calls sent to another engine after one failed
}

// NewFleet makes a fleet of engines, one per configuration (at least one); it contacts none.
func NewFleet(cfgs []EngineConfig) (*Fleet, error) {
	if len(cfgs) == 0 {
		return nil, errors.New("rollout: an engine fleet needs at least one base URL")
	}
	f := &Fleet{now: time.Now}
	seen := map[string]bool{}
	for _, c := range cfgs {
		e, err := NewEnginePolicy(c)
		if err != nil {
			return nil, err
		}
		if seen[e.base] {
			return nil, fmt.Errorf("rollout: engine %s is listed twice", e.base)
		}
		seen[e.base] = true
		f.members = append(f.members, &fleetMember{e: e})
	}
	return f, nil
}

// Engines are the fleet's engines, in the order of the configuration.
func (f *Fleet) Engines() []*EnginePolicy {
	out := make([]*EnginePolicy, len(f.members))
	for i, m := range f.members {
		out[i] = m.e
	}
	return out
}

// BaseURLs lists the engines' base URLs, comma-separated.
func (f *Fleet) BaseURLs() string {
	urls := make([]string, len(f.members))
	for i, m := range f.members {
		urls[i] = m.e.base
	}
	return strings.Join(urls, ",")
}

// Stats returns the fleet's counts and the sum of its engines' counts.
func (f *Fleet) Stats() (FleetStats, EngineStats) {
	var sum EngineStats
	for _, m := range f.members {
		s := m.e.Stats()
		sum.Requests += s.Requests
		sum.Retries += s.Retries
		sum.Failures += s.Failures
		sum.MissingLogprobs += s.MissingLogprobs
		sum.EndTokenMissing += s.EndTokenMissing
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats, sum
}

// Out lists the engines that take no calls now (cooling down after a failure, or without the
// current weights), with why.
func (f *Fleet) Out() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	var out []string
	for _, m := range f.members {
		switch {
		case f.pushed && m.version != f.version:
			out = append(out, fmt.Sprintf("%s (holds the weights of version %d, not %d: %v)", m.e.base, m.version, f.version, m.lastErr))
		case now.Before(m.downUntil):
			out = append(out, fmt.Sprintf("%s (failed %d times in a row, back in %v: %v)", m.e.base, m.fails, m.downUntil.Sub(now).Round(time.Second), m.lastErr))
		}
	}
	return out
}

// Served is how many calls each engine answered, in the order of Engines.
func (f *Fleet) Served() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]int, len(f.members))
	for i, m := range f.members {
		out[i] = m.served
	}
	return out
}

// Generate implements Policy: the call goes to one engine (see Fleet), and to the next when
// that one fails.
func (f *Fleet) Generate(ctx context.Context, prompt []int, sp SamplingParams) (Generation, error) {
	tried := make([]bool, len(f.members))
	var errs []error
	for {
		i, version, ok := f.pick(prompt, tried, len(errs) > 0)
		if !ok {
			break
		}
		m := f.members[i]
		g, err := m.e.Generate(ctx, prompt, sp)
		f.done(m, version, err, ctx)
		if err == nil {
			g.WeightVersion = version
			return g, nil
		}
		if ctx.Err() != nil {
			return Generation{}, err
		}
		tried[i] = true
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return Generation{}, fmt.Errorf("rollout: no engine of the fleet holds the current weights (%s)", strings.Join(f.Out(), "; "))
	}
	return Generation{}, fmt.Errorf("rollout: every engine of the fleet failed this call: %w", errors.Join(errs...))
}

// pick chooses the engine of a call among those not tried yet, and takes a slot on it;
// failover says an engine failed the call before.
func (f *Fleet) pick(prompt []int, tried []bool, failover bool) (int, int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.members)
	h := fnv.New64a()
	for _, t := range prompt {
		h.Write([]byte{byte(t), byte(t >> 8), byte(t >> 16), byte(t >> 24)})
	}
	pref := int(h.Sum64() % uint64(n))
	now := f.now()
	best, least, retry := -1, -1, -1
	for k := range n {
		i := (pref + k) % n // from the prompt's own engine on, so ties keep the affinity
		m := f.members[i]
		if tried[i] || (f.pushed && m.version != f.version) {
			continue
		}
		if now.Before(m.downUntil) {
			if retry < 0 || m.downUntil.Before(f.members[retry].downUntil) {
				retry = i
			}
			continue
		}
		if least < 0 || m.inFlight < f.members[least].inFlight {
			least = i
		}
	}
	switch {
	case least < 0 && retry < 0:
		return 0, 0, false
	case least < 0:
		best = retry // every engine left is cooling down: try the one back soonest
	case pref == least || tried[pref] || (f.pushed && f.members[pref].version != f.version) ||
		now.Before(f.members[pref].downUntil) || f.members[pref].inFlight > f.members[least].inFlight+FleetSlack:
		best = least
	default:
		best = pref
	}
	if failover {
		f.stats.Failovers++
	}
	m := f.members[best]
	m.inFlight++
	return best, m.version, true
}

// done gives the slot back and records how the call went.
func (f *Fleet) done(m *fleetMember, version int, err error, ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m.inFlight--
	if err == nil {
		m.fails, m.served = 0, m.served+1
		f.stats.Generations++
		if version < f.version {
			f.stats.Stale++
		}
		return
	}
	if ctx.Err() != nil {
		return // the caller gave up: nothing is known of the engine
	}
	m.fails++
	m.lastErr = err
	m.downUntil = f.now().Add(min(FleetCooldown<<min(m.fails-1, 16), FleetMaxCooldown))
}

// Sync makes version the current weights. With reload nil the engines are not told (their
// weights stay the initial ones, and the calls they answer from then on count as stale).
// Otherwise reload is called for every engine, all at once; an engine it fails for is out
// until a later Sync succeeds for it, and its error is in failed. err is set only when every
// engine failed.
func (f *Fleet) Sync(ctx context.Context, version int, reload func(context.Context, *EnginePolicy) error) (failed []error, err error) {
	f.mu.Lock()
	f.version = version
	f.mu.Unlock()
	if reload == nil {
		return nil, nil
	}
	errs := make([]error, len(f.members))
	var wg sync.WaitGroup
	for i, m := range f.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = reload(ctx, m.e)
		}()
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushed = true
	for i, m := range f.members {
		if errs[i] == nil {
			m.version, m.fails, m.downUntil = version, 0, time.Time{}
			continue
		}
		m.lastErr = errs[i]
		failed = append(failed, errs[i])
	}
	if len(failed) == len(f.members) {
		return failed, fmt.Errorf("rollout: no engine of the fleet took the weights of version %d: %w", version, errors.Join(failed...))
	}
	return failed, nil
}
