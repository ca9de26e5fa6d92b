package reward

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlhost/rlhost/sdk/task"
)

// scorer is an in-process Scorer: fn scores one item; hooks make calls fail, sleep or panic.
type scorer struct {
	calls    atomic.Int32
	maxBatch atomic.Int32
	active   atomic.Int32
	peak     atomic.Int32
	// failCalls: the first failCalls calls fail as a whole.
	failCalls int32
	fn        func(ctx context.Context, it task.ScoreItem) task.ScoreResult
}

func (s *scorer) Score(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	n := s.calls.Add(1)
	a := s.active.Add(1)
	defer s.active.Add(-1)
	for {
		p := s.peak.Load()
		if a <= p || s.peak.CompareAndSwap(p, a) {
			break
		}
	}
	if int32(len(items)) > s.maxBatch.Load() {
		s.maxBatch.Store(int32(len(items)))
	}
	if n <= s.failCalls {
		return nil, errors.New("plugin rlhost-task-x exited during Score")
	}
	out := make([]task.ScoreResult, len(items))
	for i, it := range items {
		out[i] = s.fn(ctx, it)
	}
	return out, nil
}

// byValue scores an item with the number in its Solution; "err" gives a per-item error,
// "sleep" blocks for a minute ignoring the context, "panic" panics.
func byValue(ctx context.Context, it task.ScoreItem) task.ScoreResult {
	switch it.Solution {
	case "err":
		return task.ScoreResult{Err: "no answer found"}
	case "sleep":
		time.Sleep(time.Minute)
	case "panic":
		panic("boom")
	}
	v, err := strconv.ParseFloat(it.Solution, 64)
	if err != nil {
		return task.ScoreResult{Err: err.Error()}
	}
	return task.ScoreResult{Score: v}
}

func items(sol ...string) []Item {
	out := make([]Item, len(sol))
	for i, s := range sol {
		out[i] = Item{ScoreItem: task.ScoreItem{DataSource: "test", Solution: s}, ResponseLength: 10}
	}
	return out
}

func mustNew(t *testing.T, cfg Config) Manager {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestManagers(t *testing.T) {
	tests := []struct {
		kind      string
		wantCalls int32
		wantBatch int32
	}{
		{Naive, 5, 1},
		{DAPO, 5, 1},
		{Batch, 1, 5},
		{Parallel, 5, 1},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			s := &scorer{fn: byValue}
			m := mustNew(t, Config{Kind: tt.kind, Workers: 3})
			res, st, err := m.Score(context.Background(), s, items("1", "0.5", "err", "0", "-1"))
			if err != nil {
				t.Fatal(err)
			}
			want := []float64{1, 0.5, 0, 0, -1}
			for i, r := range res {
				if r.Score != want[i] {
					t.Errorf("result %d: score %g, want %g", i, r.Score, want[i])
				}
			}
			if res[2].Err != "no answer found" || res[2].TimedOut {
				t.Errorf("per-item error: %+v", res[2])
			}
			if st.Scored != 4 || st.Errors != 1 || st.Timeouts != 0 {
				t.Errorf("stats %+v, want 4 scored, 1 error", st)
			}
			if s.calls.Load() != tt.wantCalls || s.maxBatch.Load() != tt.wantBatch {
				t.Errorf("%d calls of up to %d items, want %d of %d", s.calls.Load(), s.maxBatch.Load(), tt.wantCalls, tt.wantBatch)
			}
		})
	}
}

func TestParallelWorkers(t *testing.T) {
	s := &scorer{fn: func(ctx context.Context, it task.ScoreItem) task.ScoreResult {
		time.Sleep(20 * time.Millisecond)
		return task.ScoreResult{Score: 1}
	}}
	m := mustNew(t, Config{Kind: Parallel, Workers: 4})
	start := time.Now()
	_, st, err := m.Score(context.Background(), s, items("a", "b", "c", "d", "e", "f", "g", "h"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Scored != 8 {
		t.Errorf("stats %+v", st)
	}
	if p := s.peak.Load(); p < 2 || p > 4 {
		t.Errorf("peak concurrency %d, want 2..4 (4 workers)", p)
	}
	if el := time.Since(start); el > 150*time.Millisecond {
		t.Logf("8 x 20 ms on 4 workers took %v (slow machine?)", el)
	}
}

// A scorer that sleeps past the timeout (ignoring its context): the item scores 0, is
// counted, and the batch returns soon after the timeout.
func TestTimeouts(t *testing.T) {
	for _, kind := range []string{Parallel, Naive, Batch} {
		t.Run(kind, func(t *testing.T) {
			s := &scorer{fn: byValue}
			m := mustNew(t, Config{Kind: kind, Workers: 2, Timeout: 250 * time.Millisecond})
			start := time.Now()
			res, st, err := m.Score(context.Background(), s, items("1", "sleep", "1"))
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("took %v: the batch waited for the sleeping scorer", el)
			}
			if !res[1].TimedOut || res[1].Score != 0 || !strings.Contains(res[1].Err, "timed out") {
				t.Errorf("sleeping item: %+v", res[1])
			}
			wantTimeouts := 1
			if kind == Batch { // one call for the batch: all its items time out
				wantTimeouts = 3
			}
			if st.Timeouts != wantTimeouts || st.Scored != 3-wantTimeouts || st.Errors != 0 {
				t.Errorf("stats %+v, want %d timeouts", st, wantTimeouts)
			}
			if kind != Batch && (res[0].Score != 1 || res[2].Score != 1) {
				t.Errorf("other items: %+v %+v", res[0], res[2])
			}
		})
	}
}

func TestCallFailures(t *testing.T) {
	tests := []struct {
		name      string
		failCalls int32
		sol       string
		wantScore float64
		wantErr   string
		wantCalls int32
	}{
		{"fails once, retried", 1, "1", 1, "", 2},
		{"fails twice", 2, "1", 0, "Score failed twice: plugin rlhost-task-x exited during Score", 2},
		{"panics", 0, "panic", 0, "scorer panicked: boom", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scorer{fn: byValue, failCalls: tt.failCalls}
			m := mustNew(t, Config{Kind: Batch})
			res, st, err := m.Score(context.Background(), s, items(tt.sol))
			if err != nil {
				t.Fatal(err)
			}
			if res[0].Score != tt.wantScore || !strings.Contains(res[0].Err, tt.wantErr) || (tt.wantErr == "") != (res[0].Err == "") {
				t.Errorf("result %+v, want score %g err %q", res[0], tt.wantScore, tt.wantErr)
			}
			if s.calls.Load() != tt.wantCalls {
				t.Errorf("%d calls, want %d", s.calls.Load(), tt.wantCalls)
			}
			if tt.wantErr != "" && st.Errors != 1 {
				t.Errorf("stats %+v, want 1 error", st)
			}
		})
	}
}

type shortScorer struct{}

func (shortScorer) Score(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	return make([]task.ScoreResult, len(items)-1), nil
}

func TestWrongResultCount(t *testing.T) {
	m := mustNew(t, Config{Kind: Batch})
	res, st, err := m.Score(context.Background(), shortScorer{}, items("1", "2"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Errors != 2 || !strings.Contains(res[0].Err, "returned 1 results for 2 items") {
		t.Errorf("stats %+v, result %+v", st, res[0])
	}
}

func TestCancel(t *testing.T) {
	for _, kind := range Kinds {
		ctx, cancel := context.WithCancel(context.Background())
		s := &scorer{fn: func(ctx context.Context, it task.ScoreItem) task.ScoreResult {
			cancel()
			return task.ScoreResult{Score: 1}
		}}
		_, _, err := mustNew(t, Config{Kind: kind}).Score(ctx, s, items("1", "2", "3"))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err %v, want context.Canceled", kind, err)
		}
	}
}

func TestOverlongPenalty(t *testing.T) {
	o := Overlong{Enable: true, MaxLen: 100, Buffer: 20, PenaltyFactor: 1.5}
	tests := []struct {
		length int
		want   float64
	}{
		{0, 0},
		{79, 0},
		{80, 0}, // exactly max_len - buffer: no penalty
		{81, -1.0 / 20 * 1.5},
		{90, -0.75},
		{100, -1.5}, // at max_len: -factor
		{110, -2.25},
	}
	for _, tt := range tests {
		if got := o.Penalty(tt.length); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("Penalty(%d) = %g, want %g", tt.length, got, tt.want)
		}
	}
	if got := (Overlong{MaxLen: 100, Buffer: 20, PenaltyFactor: 1}).Penalty(100); got != 0 {
		t.Errorf("disabled: %g", got)
	}

	m := mustNew(t, Config{Kind: DAPO, Overlong: o})
	its := items("1", "1", "err")
	its[0].ResponseLength, its[1].ResponseLength, its[2].ResponseLength = 50, 90, 100
	res, _, err := m.Score(context.Background(), &scorer{fn: byValue}, its)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Score != 1 || res[0].Extra["overlong"] != false || res[0].Extra["overlong_reward"] != 0.0 {
		t.Errorf("short response: %+v", res[0])
	}
	if res[1].Score != 0.25 || res[1].Extra["overlong"] != true || res[1].Extra["overlong_reward"] != -0.75 {
		t.Errorf("long response: %+v", res[1])
	}
	if res[2].Score != 0 || res[2].Err == "" {
		t.Errorf("an error scores 0, without penalty: %+v", res[2])
	}
}

func TestWeights(t *testing.T) {
	s := &scorer{fn: func(ctx context.Context, it task.ScoreItem) task.ScoreResult {
		switch it.Solution {
		case "components":
			return task.ScoreResult{Score: 99, Components: map[string]float64{"acc": 1, "format": 0.5, "tool": 1}}
		case "nan":
			return task.ScoreResult{Score: math.NaN()}
		}
		return task.ScoreResult{Score: 0.7}
	}}
	m := mustNew(t, Config{Kind: Naive, Weights: map[string]float64{"acc": 1, "format": 0.2, "missing": 5}})
	res, st, err := m.Score(context.Background(), s, items("components", "plain", "nan"))
	if err != nil {
		t.Fatal(err)
	}
	// acc*1 + format*0.2; tool has no weight, missing is absent.
	if got := res[0].Score; math.Abs(got-1.1) > 1e-12 {
		t.Errorf("weighted score %g, want 1.1", got)
	}
	if len(res[0].Components) != 3 || res[0].Components["tool"] != 1 {
		t.Errorf("components not all kept: %v", res[0].Components)
	}
	if res[1].Score != 0.7 {
		t.Errorf("a result without components keeps its score: %g", res[1].Score)
	}
	if res[2].Score != 0 || !strings.Contains(res[2].Err, "NaN") || st.Errors != 1 {
		t.Errorf("NaN score: %+v, stats %+v", res[2], st)
	}
}

func TestConfigCheck(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Kind: "paralel"}, `did you mean "parallel"`},
		{Config{Kind: "prime"}, "unknown reward manager"},
		{Config{Kind: Naive, Workers: -1}, "workers"},
		{Config{Kind: Naive, Timeout: -time.Second}, "timeout"},
		{Config{Kind: DAPO, Overlong: Overlong{Enable: true, MaxLen: 10}}, "buffer length = 0"},
		{Config{Kind: DAPO, Overlong: Overlong{Enable: true, MaxLen: 10, Buffer: 20}}, "exceeds"},
		{Config{Kind: DAPO, Overlong: Overlong{Enable: true, MaxLen: 10, Buffer: 5, PenaltyFactor: -1}}, "penalty factor"},
		{Config{Kind: Naive, Weights: map[string]float64{"acc": math.Inf(1)}}, `component "acc"`},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), "reward: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tt.cfg, err, tt.want)
		}
	}
}

func TestPlaceOnLastToken(t *testing.T) {
	mask := []float32{
		1, 1, 1, 0, // right padding
		1, 0, 1, 0, // a tool token inside, padding after
		1, 1, 0, 0, // the model's last token, then tool tokens that end the response
		0, 0, 0, 0, // empty response
	}
	got := PlaceOnLastToken([]float64{1, 2, 3, 4}, mask, 4, 4)
	want := []float32{
		0, 0, 1, 0,
		0, 0, 2, 0,
		0, 3, 0, 0,
		4, 0, 0, 0,
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestConcurrentManagers(t *testing.T) {
	// One manager used from several goroutines (validation and training at once).
	m := mustNew(t, Config{Kind: Parallel, Workers: 2})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _, err := m.Score(context.Background(), &scorer{fn: byValue}, items(fmt.Sprint(g), "1"))
			if err != nil || res[0].Score != float64(g) {
				t.Errorf("goroutine %d: %v %+v", g, err, res)
			}
		}()
	}
	wg.Wait()
}

// A component that is NaN or infinite fails its item (score 0, counted in Stats.Errors), with
// or without weights: it could neither be trained on nor averaged into the step's metrics.
func TestNonFiniteComponents(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		s := &scorer{fn: func(ctx context.Context, it task.ScoreItem) task.ScoreResult {
			if it.Solution == "bad" {
				return task.ScoreResult{Score: 1, Components: map[string]float64{"acc": 1, "format": v}}
			}
			return task.ScoreResult{Score: 1, Components: map[string]float64{"acc": 1}}
		}}
		for _, weights := range []map[string]float64{nil, {"acc": 1}} {
			m := mustNew(t, Config{Kind: Batch, Weights: weights})
			res, st, err := m.Score(context.Background(), s, items("bad", "good"))
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`reward: the task's reward component "format" is %g`, v)
			if res[0].Score != 0 || res[0].Err != want || st.Errors != 1 || st.Scored != 1 || res[1].Score != 1 {
				t.Errorf("component %g, weights %v: %+v %+v, stats %+v; want item 0 failed with %q", v, weights, res[0], res[1], st, want)
			}
		}
	}
}

// namedTimeout is a scorer that honours its context and says so, as a plugin does.
type namedTimeout struct{}

func (namedTimeout) Score(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	start := time.Now()
	<-ctx.Done()
	return nil, fmt.Errorf("plugin rlhost-task-x: Score of %d items got no answer within 200ms and was cancelled after %v", len(items), time.Since(start).Round(100*time.Millisecond))
}

// A timed-out call's error is the scorer's own account when it gives one.
func TestTimeoutNamesTheScorer(t *testing.T) {
	m := mustNew(t, Config{Kind: Batch, Timeout: 200 * time.Millisecond})
	res, st, err := m.Score(context.Background(), namedTimeout{}, items("1", "2"))
	if err != nil {
		t.Fatal(err)
	}
	want := "reward: plugin rlhost-task-x: Score of 2 items got no answer within 200ms and was cancelled after 200ms"
	if st.Timeouts != 2 || !res[0].TimedOut || res[0].Err != want {
		t.Fatalf("stats %+v, result %+v; want 2 timeouts with %q", st, res[0], want)
	}
}
