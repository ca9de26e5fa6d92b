package config

import (
	"strings"
	"testing"
)

func TestEngineKeys(t *testing.T) {
	for _, tc := range []struct {
		overrides []string
		err       string // substring of Validate's error; "" = valid
		warn      string // substring of a warning; "" = none about the engine
	}{
		{[]string{"actor_rollout_ref.rollout.name=openai"}, "needs actor_rollout_ref.rollout.engine.base_url", "update_weights_url is empty"},
		{[]string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=localhost:8000"},
			`base_url: "localhost:8000" is not an http://`, "update_weights_url is empty"},
		// a fleet: comma-separated URLs, each checked
		{[]string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=http://127.0.0.1:8000,http://10.0.0.2:8000"},
			"", "update_weights_url is empty"},
		{[]string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=http://127.0.0.1:8000, gpu2:8000"},
			`base_url: "gpu2:8000" is not an http://`, "update_weights_url is empty"},
		{[]string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=http://127.0.0.1:8000"},
			"", "update_weights_url is empty"},
		{[]string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=http://127.0.0.1:8000",
			"actor_rollout_ref.rollout.engine.timeout=0"}, "actor_rollout_ref.rollout.engine.timeout", "update_weights_url is empty"},
		{[]string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=http://127.0.0.1:8000",
			"actor_rollout_ref.rollout.engine.update_weights_url=/update_weights_from_disk",
			`actor_rollout_ref.rollout.engine.update_weights_body='{"model_path": "/w"}'`}, "has no {path}", ""},
		{[]string{"actor_rollout_ref.rollout.name=openai", "actor_rollout_ref.rollout.engine.base_url=http://127.0.0.1:8000",
			"actor_rollout_ref.rollout.engine.update_weights_url=/update_weights_from_disk",
			"actor_rollout_ref.rollout.engine.protocol=sglang"}, "", ""},
		// The engine keys are not checked unless the engine is used.
		{[]string{"actor_rollout_ref.rollout.engine.timeout=0"}, "", ""},
	} {
		c := Default() // Load validates too; Apply and Validate keep the two apart here
		for _, o := range tc.overrides {
			if err := c.Apply(o); err != nil {
				t.Fatalf("%s: %v", o, err)
			}
		}
		err := c.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: Validate() = %v", tc.overrides, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: Validate() = %v, want an error with %q", tc.overrides, err, tc.err)
		}
		w := strings.Join(c.Warnings(), "\n")
		if tc.warn != "" && !strings.Contains(w, tc.warn) || tc.warn == "" && strings.Contains(w, "engine") {
			t.Errorf("%v: Warnings() = %q, want %q", tc.overrides, w, tc.warn)
		}
	}
	if err := Default().Apply("actor_rollout_ref.rollout.engine.protocol=tgi"); err == nil || !strings.Contains(err.Error(), "not one of vllm, sglang, llamacpp, llama-cpp-python") {
		t.Errorf("protocol=tgi: %v", err)
	}
}
