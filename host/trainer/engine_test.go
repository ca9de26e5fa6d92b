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
