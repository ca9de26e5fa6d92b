package trainer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/config"
)

// After a step the policy is saved where the engine can read it, the reload call names that
// directory (SGLang's update_weights_from_disk shape by default), the directory holds a
// checkpoint equal to the actor, and the previous directory goes once the next one is loaded.
func TestSyncEngine(t *testing.T) {
	m, tk := smol(t)
	var paths []string
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/update_weights_from_disk" || r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer k3y" {
			http.Error(w, "bad request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		var body struct {
			ModelPath string `json:"model_path"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		paths = append(paths, body.ModelPath)
		if fail {
			json.NewEncoder(w).Encode(map[string]any{"success": false, "message": "shape mismatch"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"success": true, "message": "ok"})
	}))
	defer srv.Close()
	t.Setenv("TEST_ENGINE_KEY", "k3y")
	cfg := config.Default()
	for _, o := range []string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=" + srv.URL,
		"actor_rollout_ref.rollout.engine.update_weights_url=/update_weights_from_disk", "actor_rollout_ref.rollout.engine.api_key_env=TEST_ENGINE_KEY",
		"actor_rollout_ref.rollout.engine.protocol=sglang"} {
		if err := cfg.Apply(o); err != nil {
			t.Fatal(err)
		}
	}
	run := t.TempDir()
	tr := &Trainer{cfg: cfg, actor: m, tk: tk, runDir: run, log: hclog.NewNullLogger(), opts: Options{Progress: io.Discard}}
	if err := tr.openEngine(); err != nil {
		t.Fatal(err)
	}
	vals, err := tr.afterStepEngine(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(run, "engine_weights", "global_step_1")
	if len(paths) != 1 || paths[0] != want {
		t.Fatalf("reload calls %q, want [%q]", paths, want)
	}
	if _, ok := vals["timing_s/engine_weights"]; !ok || vals["engine/requests"] != 0 {
		t.Errorf("metrics %v", vals)
	}
	ck, err := weights.Load(want)
	if err != nil {
		t.Fatal(err)
	}
	orig := m.Params.Checkpoint(m.HF)
	for name, ten := range orig.Tensors {
		got, ok := ck.Tensors[name]
		if !ok {
			if name == "lm_head.weight" && orig.Config.TieWordEmbeddings {
				continue
			}
			t.Fatalf("saved checkpoint lacks %s", name)
		}
		for i := range ten.Data {
			if got.Data[i] != ten.Data[i] {
				t.Fatalf("%s[%d] = %v, want %v", name, i, got.Data[i], ten.Data[i])
			}
		}
	}
	if _, err := tr.afterStepEngine(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Errorf("step 1's weights are still there after step 2 was loaded: %v", err)
	}
	// An engine that says the load failed stops the run with its message.
	fail = true
	if _, err := tr.afterStepEngine(context.Background(), 3); err == nil || !strings.Contains(err.Error(), "the engine says it failed: shape mismatch") {
		t.Errorf("failed reload: %v", err)
	}
}

// A fleet: every engine is told to reload after each step; one that fails is out (the run goes
// on, engine/out counts it) until a later step's reload reaches it; when every engine fails the
// step fails.
func TestSyncEngineFleet(t *testing.T) {
	m, tk := smol(t)
	fails := map[int]bool{}
	var calls [2][]string
	var srvs [2]*httptest.Server
	for i := range srvs {
		srvs[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				ModelPath string `json:"model_path"`
			}
			json.NewDecoder(r.Body).Decode(&body)
			calls[i] = append(calls[i], filepath.Base(body.ModelPath))
			if fails[i] {
				http.Error(w, "out of memory", http.StatusInternalServerError)
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"success": true})
		}))
		defer srvs[i].Close()
	}
	cfg := config.Default()
	for _, o := range []string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=" + srvs[0].URL + "," + srvs[1].URL,
		"actor_rollout_ref.rollout.engine.update_weights_url=/update_weights_from_disk", "actor_rollout_ref.rollout.engine.protocol=sglang"} {
		if err := cfg.Apply(o); err != nil {
			t.Fatal(err)
		}
	}
	tr := &Trainer{cfg: cfg, actor: m, tk: tk, runDir: t.TempDir(), log: hclog.NewNullLogger(), opts: Options{Progress: io.Discard}}
	if err := tr.openEngine(); err != nil {
		t.Fatal(err)
	}
	step := func(n int, wantOut float64) {
		t.Helper()
		vals, err := tr.afterStepEngine(context.Background(), n)
		if err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
		if vals["engine/out"] != wantOut {
			t.Errorf("step %d: engine/out %v, want %v (%q)", n, vals["engine/out"], wantOut, tr.engine.policy.Out())
		}
	}
	step(1, 0)
	fails[1] = true
	step(2, 1)
	if out := tr.engine.policy.Out(); len(out) != 1 || !strings.Contains(out[0], srvs[1].URL) || !strings.Contains(out[0], "out of memory") {
		t.Errorf("Out() = %q", out)
	}
	delete(fails, 1)
	step(3, 0)
	for i, want := range []string{"global_step_1 global_step_2 global_step_3", "global_step_1 global_step_2 global_step_3"} {
		if got := strings.Join(calls[i], " "); got != want {
			t.Errorf("engine %d reloaded %q, want %q", i, got, want)
		}
	}
	fails[0], fails[1] = true, true
	if _, err := tr.afterStepEngine(context.Background(), 4); err == nil || !strings.Contains(err.Error(), "no engine of the fleet took the weights of version 4") {
		t.Errorf("every reload failing: %v", err)
	}
}
