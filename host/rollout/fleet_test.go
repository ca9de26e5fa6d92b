package rollout

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// vllmServer is a vLLM-shaped engine answering /v1/completions with wantIDs; while down is
// set it answers 503; calls counts the completions it answered.
type vllmServer struct {
	srv     *httptest.Server
	down    atomic.Bool
	calls   atomic.Int32
	arrived atomic.Int32  // requests received
	hold    chan struct{} // when set, each answer waits for it
}

func newVLLMServer(t *testing.T) *vllmServer {
	s := &vllmServer{}
	reply := func(req map[string]any) (int, any) {
		s.arrived.Add(1)
		if s.hold != nil {
			<-s.hold
		}
		if s.down.Load() {
			return 503, map[string]any{"error": "down"}
		}
		s.calls.Add(1)
		return 200, map[string]any{"choices": []any{map[string]any{"text": "x", "token_ids": wantIDs, "finish_reason": "stop",
			"logprobs": map[string]any{"tokens": []string{"a", "b", ""}, "token_logprobs": wantLPs}}}}
	}
	s.srv, _ = engineServer(t, "/v1/completions", reply)
	return s
}

func newTestFleet(t *testing.T, servers ...*vllmServer) *Fleet {
	var cfgs []EngineConfig
	for _, s := range servers {
		cfgs = append(cfgs, EngineConfig{BaseURL: s.srv.URL, APIKey: "sekret", MaxRetries: 0, Timeout: 5 * time.Second})
	}
	f, err := NewFleet(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var fleetSP = SamplingParams{MaxTokens: 8, Temperature: 1, TopP: 1, TopK: -1}

// A prompt's calls stay on one engine (its prefix cache), and different prompts spread over
// the engines.
func TestFleetPromptAffinity(t *testing.T) {
	a, b, c := newVLLMServer(t), newVLLMServer(t), newVLLMServer(t)
	f := newTestFleet(t, a, b, c)
	ctx := context.Background()
	for p := range 30 {
		prompt := []int{1, 2, p}
		var first []int32
		for range 4 { // a GRPO group: the same prompt four times, one after the other
			if _, err := f.Generate(ctx, prompt, fleetSP); err != nil {
				t.Fatal(err)
			}
			now := []int32{a.calls.Load(), b.calls.Load(), c.calls.Load()}
			if first == nil {
				first = now
				continue
			}
			moved := 0
			for i := range now {
				if now[i] != first[i] {
					moved++
				}
			}
			if moved != 1 {
				t.Fatalf("prompt %d: a group's calls went to %d engines (calls %v then %v)", p, moved, first, now)
			}
			first = now
		}
	}
	served := f.Served()
	for i, n := range served {
		if n < 12 { // 120 calls over 3 engines, by 30 prompts' hashes
			t.Errorf("engine %d answered %d of 120 calls (%v): prompts do not spread", i, n, served)
		}
	}
	if fs, es := f.Stats(); fs.Generations != 120 || fs.Failovers != 0 || es.Requests != 120 {
		t.Errorf("stats %+v %+v", fs, es)
	}
}

// A busy engine gives the prompt's calls to the least busy one past FleetSlack.
func TestFleetLoad(t *testing.T) {
	a, b := newVLLMServer(t), newVLLMServer(t)
	a.hold = make(chan struct{})
	f := newTestFleet(t, a, b)
	// a prompt that prefers engine a
	var prompt []int
	for p := 0; ; p++ {
		prompt = []int{p}
		if i, _, _ := f.pick(prompt, make([]bool, 2), false); i == 0 {
			f.done(f.members[0], 0, nil, context.Background())
			break
		} else {
			f.done(f.members[i], 0, nil, context.Background())
		}
	}
	// the prompt's engine holds its calls: FleetSlack+1 stay there, one at a time...
	var wg sync.WaitGroup
	for k := range FleetSlack + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.Generate(context.Background(), prompt, fleetSP); err != nil {
				t.Error(err)
			}
		}()
		for deadline := time.Now().Add(5 * time.Second); a.arrived.Load() <= int32(k) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	// ...then the engine is FleetSlack+1 calls busier than the idle one, which takes the next
	for range 3 {
		if _, err := f.Generate(context.Background(), prompt, fleetSP); err != nil {
			t.Fatal(err)
		}
	}
	close(a.hold)
	wg.Wait()
	if a.calls.Load() != int32(FleetSlack+1) || b.calls.Load() != 3 {
		t.Errorf("calls a %d, b %d: want %d on the prompt's engine and the rest on the idle one", a.calls.Load(), b.calls.Load(), FleetSlack+1)
	}
}

// An engine that fails is taken out: its call goes to another engine, later calls avoid it
// until its cooldown ends, then it is tried again and used when it answers.
func TestFleetFailover(t *testing.T) {
	a, b := newVLLMServer(t), newVLLMServer(t)
	f := newTestFleet(t, a, b)
	clock := time.Unix(1000, 0)
	f.now = func() time.Time { return clock }
	a.down.Store(true)
	ctx := context.Background()
	for p := range 20 {
		if _, err := f.Generate(ctx, []int{p}, fleetSP); err != nil {
			t.Fatal(err)
		}
	}
	fs, _ := f.Stats()
	if a.calls.Load() != 0 || b.calls.Load() != 20 || fs.Failovers != 1 {
		t.Errorf("a down: calls a %d, b %d, failovers %d: want all on b after one failover", a.calls.Load(), b.calls.Load(), fs.Failovers)
	}
	if out := f.Out(); len(out) != 1 || !strings.Contains(out[0], a.srv.URL) || !strings.Contains(out[0], "503") {
		t.Errorf("Out() = %q", out)
	}
	// back up, cooldown over: prompts that prefer a go there again
	a.down.Store(false)
	clock = clock.Add(FleetCooldown + time.Second)
	for p := range 20 {
		if _, err := f.Generate(ctx, []int{p}, fleetSP); err != nil {
			t.Fatal(err)
		}
	}
	if a.calls.Load() == 0 || len(f.Out()) != 0 {
		t.Errorf("after the cooldown: a answered %d calls, out %q", a.calls.Load(), f.Out())
	}
	// both down: the call fails naming both; then the one back soonest is tried first
	a.down.Store(true)
	b.down.Store(true)
	_, err := f.Generate(ctx, []int{1}, fleetSP)
	if err == nil || !strings.Contains(err.Error(), a.srv.URL) || !strings.Contains(err.Error(), b.srv.URL) {
		t.Fatalf("every engine down: %v", err)
	}
	b.down.Store(false)
	if _, err := f.Generate(ctx, []int{1}, fleetSP); err != nil {
		t.Errorf("every engine cooling down, b back: %v (the fleet must try them again)", err)
	}
}

// Sync: an engine whose reload fails takes no calls (it holds the old weights) until a later
// Sync succeeds for it; every Generation carries the version that sampled it; without reload
// the calls after a Sync are counted stale.
func TestFleetSync(t *testing.T) {
	a, b := newVLLMServer(t), newVLLMServer(t)
	f := newTestFleet(t, a, b)
	ctx := context.Background()
	fail := map[string]bool{a.srv.URL: true}
	reload := func(_ context.Context, e *EnginePolicy) error {
		if fail[e.BaseURL()] {
			return fmt.Errorf("engine reload %s: HTTP 500", e.BaseURL())
		}
		return nil
	}
	failed, err := f.Sync(ctx, 1, reload)
	if err != nil || len(failed) != 1 || !strings.Contains(failed[0].Error(), a.srv.URL) {
		t.Fatalf("Sync: failed %v, err %v", failed, err)
	}
	for p := range 10 {
		g, err := f.Generate(ctx, []int{p}, fleetSP)
		if err != nil || g.WeightVersion != 1 {
			t.Fatalf("version 1 on b only: %+v, %v", g, err)
		}
	}
	if a.calls.Load() != 0 {
		t.Errorf("a answered %d calls with the old weights", a.calls.Load())
	}
	if out := f.Out(); len(out) != 1 || !strings.Contains(out[0], "version 0, not 1") {
		t.Errorf("Out() = %q", out)
	}
	delete(fail, a.srv.URL)
	if failed, err := f.Sync(ctx, 2, reload); err != nil || len(failed) != 0 {
		t.Fatalf("Sync 2: %v %v", failed, err)
	}
	for p := range 10 {
		if g, err := f.Generate(ctx, []int{p}, fleetSP); err != nil || g.WeightVersion != 2 {
			t.Fatalf("version 2: %+v, %v", g, err)
		}
	}
	if a.calls.Load() == 0 {
		t.Error("a took the weights of version 2 but no call")
	}
	fail[a.srv.URL], fail[b.srv.URL] = true, true
	if _, err := f.Sync(ctx, 3, reload); err == nil {
		t.Error("Sync with every reload failing: no error")
	}
	if _, err := f.Generate(ctx, []int{1}, fleetSP); err == nil || !strings.Contains(err.Error(), "holds the current weights") {
		t.Errorf("no engine with version 3: %v", err)
	}
	if fs, _ := f.Stats(); fs.Stale != 0 {
		t.Errorf("%d stale calls with the weights pushed", fs.Stale)
	}

	// no reload: every call after the first Sync is sampled with the initial weights
	g := newTestFleet(t, newVLLMServer(t))
	g.Generate(ctx, []int{1}, fleetSP)
	g.Sync(ctx, 1, nil)
	for range 3 {
		if r, err := g.Generate(ctx, []int{1}, fleetSP); err != nil || r.WeightVersion != 0 {
			t.Fatalf("%+v %v", r, err)
		}
	}
	if fs, _ := g.Stats(); fs.Generations != 4 || fs.Stale != 3 {
		t.Errorf("no reload: %+v, want 3 of 4 stale", fs)
	}
}

// A caller that gives up does not take the engine out.
func TestFleetCancel(t *testing.T) {
	a := newVLLMServer(t)
	a.hold = make(chan struct{})
	f := newTestFleet(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := f.Generate(ctx, []int{1}, fleetSP)
	close(a.hold)
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled call: %v", err)
	}
	if out := f.Out(); len(out) != 0 {
		t.Errorf("a cancelled call took the engine out: %q", out)
	}
	if _, err := NewFleet([]EngineConfig{{BaseURL: "http://h:1"}, {BaseURL: "http://h:1/v1"}}); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("the same engine twice: %v", err)
	}
	if _, err := NewFleet(nil); err == nil {
		t.Error("an empty fleet: no error")
	}
}
