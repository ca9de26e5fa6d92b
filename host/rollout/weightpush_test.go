package rollout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// wire is the fake NCCL between the trainer and one test engine: the groups the trainer
// opened and the tensors it broadcast, which the engine's /update_weights reads in order.
type wire struct {
	mu      sync.Mutex
	ids     [][]byte // the unique ids the trainer minted
	opened  chan []byte
	sent    chan PushTensor // the broadcasts of the group joined last (each group its own)
	warmed  bool
	aborted int
	failAt  string // a tensor whose broadcast fails
}

// join makes a new group's channel of broadcasts, as the engine joins it.
func (w *wire) join() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = make(chan PushTensor)
}

// group is the channel of the group joined last.
func (w *wire) group() chan PushTensor {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent
}

type fakeTransport struct {
	w *wire
	n int
}

func (f *fakeTransport) UniqueID() ([]byte, error) {
	f.n++
	id := make([]byte, 128)
	for i := range id {
		id[i] = byte(f.n*31 + i)
	}
	f.w.mu.Lock()
	f.w.ids = append(f.w.ids, id)
	f.w.mu.Unlock()
	return id, nil
}

func (f *fakeTransport) Open(ctx context.Context, id []byte, world int) (WeightGroup, error) {
	// ncclCommInitRank returns once every rank has joined: here, once the engine's
	// /init_weight_transfer_engine has taken this id.
	select {
	case got := <-f.w.opened:
		if !slices.Equal(got, id) {
			return nil, fmt.Errorf("the engine joined group %x..., this side %x...", got[:4], id[:4])
		}
	case <-time.After(5 * time.Second):
		return nil, errors.New("the engine never joined the group")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &fakeGroup{w: f.w, sent: f.w.group()}, nil
}

// fakeGroup is a group's side of the wire: a broadcast lands on the group's channel, which
// only the engine's calls of that group read (an aborted group's broadcasts land nowhere).
type fakeGroup struct {
	w    *wire
	sent chan PushTensor
}

func (g *fakeGroup) Warm(context.Context) error {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	g.w.warmed = true
	return nil
}

func (g *fakeGroup) Broadcast(ctx context.Context, t PushTensor) error {
	if t.Name == g.w.failAt {
		return errors.New("NCCL error 6: unhandled system error")
	}
	select {
	case g.sent <- t:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("no rank received the broadcast")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *fakeGroup) Abort() {
	g.w.mu.Lock()
	defer g.w.mu.Unlock()
	g.w.aborted++
}

// testVLLM is a server with vLLM v0.30.0's weight-transfer routes that checks what a
// trainer without PyTorch must send, in the order it must send it, and receives the
// broadcast tensors from its wire as /update_weights lists them.
type testVLLM struct {
	t       *testing.T
	w       *wire
	url     string
	workers int
	failOn  string // a route that answers 500

	mu      sync.Mutex
	calls   []string
	group   []byte // the id of the group joined
	paused  bool
	version string
	got     []PushTensor
}

func (s *testVLLM) handler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls = append(s.calls, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	fail := func(format string, args ...any) {
		s.t.Errorf("%s %s: "+format, append([]any{r.Method, r.URL.Path}, args...)...)
		http.Error(w, fmt.Sprintf(format, args...), http.StatusBadRequest)
	}
	if r.URL.Path == s.failOn {
		http.Error(w, "engine error", http.StatusInternalServerError)
		return
	}
	var body map[string]json.RawMessage
	if r.Method == http.MethodPost && r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			fail("body: %v", err)
			return
		}
	}
	switch r.Method + " " + r.URL.Path {
	case "GET /get_world_size":
		if r.URL.Query().Get("include_dp") != "true" {
			fail("include_dp=%q", r.URL.Query().Get("include_dp"))
			return
		}
		fmt.Fprintf(w, `{"world_size": %d}`, s.workers)
	case "POST /init_weight_transfer_engine":
		var init struct {
			Info struct {
				ID         *string `json:"nccl_unique_id_b64"`
				RankOffset *int    `json:"rank_offset"`
				WorldSize  *int    `json:"world_size"`
				Packed     *bool   `json:"packed"`
				Addr       *string `json:"master_address"`
			} `json:"init_info"`
		}
		raw, _ := json.Marshal(body)
		if err := json.Unmarshal(raw, &init); err != nil || init.Info.ID == nil || init.Info.RankOffset == nil || init.Info.WorldSize == nil {
			fail("init_info %s", raw)
			return
		}
		id, err := base64.StdEncoding.DecodeString(*init.Info.ID)
		switch {
		case err != nil || len(id) != 128:
			fail("nccl_unique_id_b64 is not standard base64 of 128 bytes: %v, %d bytes", err, len(id))
		case *init.Info.RankOffset != 1 || *init.Info.WorldSize != 1+s.workers:
			fail("rank_offset %d world_size %d; want 1 and %d", *init.Info.RankOffset, *init.Info.WorldSize, 1+s.workers)
		case init.Info.Packed == nil || *init.Info.Packed || init.Info.Addr != nil:
			fail("want packed false and no master_address: %s", raw)
		default:
			s.mu.Lock()
			s.group = id
			s.mu.Unlock()
			s.w.join()
			s.w.opened <- id // the workers join the group; the trainer's Open returns
			fmt.Fprint(w, `{"message": "Weight transfer initialized"}`)
		}
	case "POST /pause":
		if r.URL.Query().Get("mode") != "wait" {
			fail("mode=%q; want wait, so that the draws in flight finish on the old weights", r.URL.Query().Get("mode"))
			return
		}
		s.mu.Lock()
		s.paused = true
		s.mu.Unlock()
		fmt.Fprint(w, `{"status": "paused"}`)
	case "POST /start_weight_update":
		fmt.Fprint(w, `{"message": "Weight update started"}`)
	case "POST /update_weights":
		var up struct {
			Info struct {
				Names  []string `json:"names"`
				DTypes []string `json:"dtype_names"`
				Shapes [][]int  `json:"shapes"`
				Packed bool     `json:"packed"`
			} `json:"update_info"`
		}
		raw, _ := json.Marshal(body)
		if err := json.Unmarshal(raw, &up); err != nil || len(up.Info.Names) == 0 || len(up.Info.DTypes) != len(up.Info.Names) ||
			len(up.Info.Shapes) != len(up.Info.Names) || up.Info.Packed {
			fail("update_info %s", raw)
			return
		}
		sent := s.w.group()
		for i, name := range up.Info.Names {
			select {
			case t := <-sent:
				if t.Name != name || t.DType != up.Info.DTypes[i] || !slices.Equal(t.Shape, up.Info.Shapes[i]) {
					fail("broadcast %d is %s %s %v; the listing says %s %s %v", i, t.Name, t.DType, t.Shape, name, up.Info.DTypes[i], up.Info.Shapes[i])
					return
				}
				s.mu.Lock()
				s.got = append(s.got, t)
				s.mu.Unlock()
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, `{"message": "Weights updated"}`)
	case "POST /finish_weight_update":
		var v string
		if err := json.Unmarshal(body["weight_version"], &v); err != nil {
			fail("weight_version: %v", err)
			return
		}
		s.mu.Lock()
		s.version = v
		s.mu.Unlock()
		fmt.Fprint(w, `{"message": "Weight update finished"}`)
	case "POST /reset_prefix_cache":
		fmt.Fprint(w, `{"status": "ok"}`)
	case "POST /resume":
		s.mu.Lock()
		s.paused = false
		s.mu.Unlock()
		fmt.Fprint(w, `{"status": "resumed"}`)
	default:
		fail("not a route of the weight-transfer API")
	}
}

func startTestVLLM(t *testing.T, workers int) (*testVLLM, *EnginePolicy) {
	t.Helper()
	s := &testVLLM{t: t, w: &wire{opened: make(chan []byte, 1)}, workers: workers}
	srv := httptest.NewServer(http.HandlerFunc(s.handler))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	e, err := NewEnginePolicy(EngineConfig{BaseURL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

func pushTensors(version int) []PushTensor {
	return []PushTensor{
		{Name: "model.embed_tokens.weight", DType: "bfloat16", Shape: []int{97, 64}, Data: version},
		{Name: "model.layers.0.self_attn.q_proj.weight", DType: "bfloat16", Shape: []int{64, 64}, Data: version},
		{Name: "model.norm.weight", DType: "float32", Shape: []int{64}, Data: version},
	}
}

var pushCalls = []string{"POST /pause", "POST /start_weight_update", "POST /update_weights", "POST /finish_weight_update",
	"POST /reset_prefix_cache", "POST /resume"}

// TestVLLMPushProtocol: two pushes to each of two engines (one of 2 workers, one of 4)
// through vLLM's weight-transfer routes: the group opened once per engine with a fresh
// id posted as standard base64 and the warm-up all-reduce run, then per push pause
// (mode=wait), start, the listing while each tensor is broadcast in its order with its
// name, dtype and shape, finish with the version, the prefix cache reset and resume.
func TestVLLMPushProtocol(t *testing.T) {
	ctx := context.Background()
	var engines []*EnginePolicy
	var servers []*testVLLM
	for _, workers := range []int{2, 4} {
		s, e := startTestVLLM(t, workers)
		servers, engines = append(servers, s), append(engines, e)
	}
	for i, s := range servers {
		p := NewVLLMPush(&fakeTransport{w: s.w})
		for version := 1; version <= 2; version++ {
			if err := p.Push(ctx, engines[i], version, pushTensors(version)); err != nil {
				t.Fatal(err)
			}
			if s.version != fmt.Sprint(version) || s.paused {
				t.Errorf("engine %d after push %d: version %q, paused %v", i, version, s.version, s.paused)
			}
		}
		want := append([]string{"GET /get_world_size", "POST /init_weight_transfer_engine"}, slices.Concat(pushCalls, pushCalls)...)
		if !slices.Equal(s.calls, want) {
			t.Errorf("engine %d: calls\n%v\nwant\n%v", i, s.calls, want)
		}
		if len(s.got) != 6 || s.got[5].Data != 2 || !s.w.warmed || len(s.w.ids) != 1 || !slices.Equal(s.group, s.w.ids[0]) {
			t.Errorf("engine %d: %d tensors landed, warmed %v, %d groups", i, len(s.got), s.w.warmed, len(s.w.ids))
		}
		p.Close()
		if s.w.aborted != 1 {
			t.Errorf("engine %d: Close aborted %d groups", i, s.w.aborted)
		}
	}
}

// TestVLLMPushFailures: an engine that fails a call after the pause, or a broadcast that
// fails, gives an error naming the engine, the version and the call, leaves the engine
// paused (its draws would use half-loaded weights) and aborts its group, which the next
// push opens again.
func TestVLLMPushFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		failOn, failAt, want string
	}{
		{"/update_weights", "", "POST /update_weights: HTTP 500"},
		{"/finish_weight_update", "", "POST /finish_weight_update: HTTP 500"},
		{"", "model.norm.weight", "broadcasting model.norm.weight: NCCL error 6"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			s, e := startTestVLLM(t, 1)
			s.failOn, s.w.failAt = tc.failOn, tc.failAt
			p := NewVLLMPush(&fakeTransport{w: s.w})
			err := p.Push(ctx, e, 3, pushTensors(3))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "version 3") ||
				!strings.Contains(err.Error(), e.BaseURL()) || !strings.Contains(err.Error(), "stays paused") {
				t.Fatalf("push: %v; want the failure of %q named", err, tc.want)
			}
			t.Log(err)
			if !s.paused || s.w.aborted != 1 || slices.Contains(s.calls, "POST /resume") {
				t.Errorf("paused %v, %d groups aborted, calls %v", s.paused, s.w.aborted, s.calls)
			}
			s.failOn, s.w.failAt = "", ""
			// the broadcasts the engine did not take are gone with the aborted group: the
			// failed push's /update_weights, if it still waits, reads that group's channel
			if err := p.Push(ctx, e, 4, pushTensors(4)); err != nil {
				t.Fatal(err)
			}
			if len(s.w.ids) != 2 || s.version != "4" || s.paused {
				t.Errorf("the next push: %d groups opened, version %q, paused %v", len(s.w.ids), s.version, s.paused)
			}
		})
	}
}

// TestVLLMPushEngineRefusesGroup: an engine that refuses the group (no weight-transfer
// backend configured) is an error naming it, and nothing is paused.
func TestVLLMPushEngineRefusesGroup(t *testing.T) {
	s, e := startTestVLLM(t, 1)
	s.failOn = "/init_weight_transfer_engine"
	p := NewVLLMPush(&fakeTransport{w: s.w})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := p.Push(ctx, e, 1, pushTensors(1))
	if err == nil || !strings.Contains(err.Error(), "opening the weight-transfer group of "+e.BaseURL()) {
		t.Fatalf("push: %v", err)
	}
	t.Log(err)
	if s.paused || slices.Contains(s.calls, "POST /pause") {
		t.Errorf("calls %v", s.calls)
	}
}

// TestVLLMPushFleetSync: a fleet pushing each step's weights through Fleet.Sync keeps an
// engine whose push failed out of the rollouts, named with the failure, while the others
// take the new version; the engine comes back once a later push reaches it.
func TestVLLMPushFleetSync(t *testing.T) {
	ctx := context.Background()
	good, _ := startTestVLLM(t, 2)
	bad, _ := startTestVLLM(t, 1)
	bad.failOn = "/update_weights"
	var urls []EngineConfig
	for _, s := range []*testVLLM{good, bad} {
		urls = append(urls, EngineConfig{BaseURL: s.url, Timeout: 10 * time.Second})
	}
	f, err := NewFleet(urls)
	if err != nil {
		t.Fatal(err)
	}
	wires := map[string]*testVLLM{f.Engines()[0].BaseURL(): good, f.Engines()[1].BaseURL(): bad}
	pushes := map[string]*VLLMPush{}
	for base, s := range wires {
		pushes[base] = NewVLLMPush(&fakeTransport{w: s.w})
	}
	push := func(version int) ([]error, error) {
		return f.Sync(ctx, version, func(ctx context.Context, e *EnginePolicy) error {
			return pushes[e.BaseURL()].Push(ctx, e, version, pushTensors(version))
		})
	}
	failed, err := push(1)
	if err != nil || len(failed) != 1 || !strings.Contains(failed[0].Error(), bad.url) {
		t.Fatalf("Sync: %v, failed %v", err, failed)
	}
	if out := f.Out(); len(out) != 1 || !strings.Contains(out[0], bad.url) || !strings.Contains(out[0], "HTTP 500") {
		t.Errorf("out: %v; want the failed engine with its cause", out)
	}
	if good.version != "1" || bad.version != "" {
		t.Errorf("versions %q and %q", good.version, bad.version)
	}
	bad.failOn = ""
	if failed, err := push(2); err != nil || len(failed) != 0 {
		t.Fatalf("Sync: %v, failed %v", err, failed)
	}
	if out := f.Out(); len(out) != 0 || good.version != "2" || bad.version != "2" {
		t.Errorf("out %v, versions %q and %q", out, good.version, bad.version)
	}
}
