package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/rollout"
)

// engine is the external rollout engine, or fleet of engines, of
// actor_rollout_ref.rollout.name=openai: rollouts go to it, and after every training step the
// policy is saved to a directory and each engine is told to reload it (docs/engines.md).
type engine struct {
	policy *rollout.Fleet
	dir    string // where the weights are saved for the engines
	last   string // the directory the engines loaded last (removed after the next reload)
	client *http.Client
	apiKey string
	prev   rollout.FleetStats // the counts at the end of the previous step
}

// openEngine sets up the external engine when the config asks for one.
func (t *Trainer) openEngine() error {
	r := t.cfg.ActorRolloutRef.Rollout
	if r.Name != "openai" {
		return nil
	}
	ec := r.Engine
	key := ""
	if ec.APIKeyEnv != "" {
		key = os.Getenv(ec.APIKeyEnv)
	}
	var cfgs []rollout.EngineConfig
	for _, u := range strings.Split(ec.BaseURL, ",") {
		cfgs = append(cfgs, rollout.EngineConfig{BaseURL: strings.TrimSpace(u), Protocol: ec.Protocol, Model: ec.Model,
			APIKey: key, Timeout: time.Duration(ec.Timeout * float64(time.Second)), MaxRetries: ec.MaxRetries, Tokenizer: t.tk})
	}
	p, err := rollout.NewFleet(cfgs)
	if err != nil {
		return fmt.Errorf("trainer: actor_rollout_ref.rollout.engine: %w", err)
	}
	dir := ec.WeightsDir
	if dir == "" {
		dir = filepath.Join(t.runDir, "engine_weights")
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	t.engine = &engine{policy: p, dir: dir, apiKey: key, client: &http.Client{Timeout: time.Duration(ec.Timeout * float64(time.Second))}}
	if ec.UpdateWeightsURL == "" {
		t.log.Warn("the external engine is not told about new weights (actor_rollout_ref.rollout.engine.update_weights_url is empty): rollouts after the first step are off-policy", "engine", p.BaseURLs())
	}
	t.log.Info("rollouts go to an external engine", "engine", p.BaseURLs(), "protocol", ec.Protocol)
	return nil
}

// afterStepEngine brings the engines the weights of the step just trained, and returns the
// engines' counts.
func (t *Trainer) afterStepEngine(ctx context.Context, step int) (map[string]float64, error) {
	if t.engine == nil {
		return nil, nil
	}
	e := t.engine
	fs, s := e.policy.Stats()
	vals := map[string]float64{engineRequests: float64(s.Requests), engineRetries: float64(s.Retries), engineFailures: float64(s.Failures),
		engineMissingLogprobs: float64(s.MissingLogprobs), engineEndTokenMissing: float64(s.EndTokenMissing),
		engineFailovers: float64(fs.Failovers)}
	if n := fs.Generations - e.prev.Generations; n > 0 {
		vals[rolloutStaleFraction] = float64(fs.Stale-e.prev.Stale) / float64(n)
	}
	e.prev = fs
	defer func() { vals[engineOut] = float64(len(e.policy.Out())) }()
	if t.cfg.ActorRolloutRef.Rollout.Engine.UpdateWeightsURL == "" {
		e.policy.Sync(ctx, step, nil) // the engines keep their weights: what they sample from now on is stale
		return vals, nil
	}
	start := time.Now()
	if err := t.syncEngine(ctx, step); err != nil {
		return vals, err
	}
	vals[timingEngineWeights] = time.Since(start).Seconds()
	return vals, nil
}

// syncEngine saves the policy as a Hugging Face checkpoint under the engines' weights
// directory and calls each engine's reload URL with its path (rollout.Fleet.Sync).
func (t *Trainer) syncEngine(ctx context.Context, step int) error {
	e := t.engine
	dir := filepath.Join(e.dir, fmt.Sprintf("global_step_%d", step))
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	ck := t.actor.Params.Checkpoint(t.actor.HF)
	if t.actor.LoRA() != nil {
		ck = t.actor.MergedCheckpoint()
	}
	if err := weights.Save(tmp, ck); err != nil {
		return fmt.Errorf("trainer: saving the weights for the engine: %w", err)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("trainer: saving the weights for the engine: %w", err)
	}
	failed, err := e.policy.Sync(ctx, step, func(ctx context.Context, p *rollout.EnginePolicy) error {
		return t.reloadEngine(ctx, p.BaseURL(), dir)
	})
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	for _, err := range failed {
		t.log.Warn("an engine did not take the new weights: it takes no rollouts until it does (tried again after the next step)", "error", err)
	}
	if e.last != "" && e.last != dir {
		os.RemoveAll(e.last)
	}
	e.last = dir
	fmt.Fprintf(t.opts.Progress, "engine: reloaded %s\n", dir)
	return nil
}

// reloadEngine calls the reload URL of the engine at base with the directory of the weights.
func (t *Trainer) reloadEngine(ctx context.Context, base, dir string) error {
	e := t.engine
	ec := t.cfg.ActorRolloutRef.Rollout.Engine
	url := ec.UpdateWeightsURL
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		url = base + "/" + strings.TrimLeft(url, "/")
	}
	q, _ := json.Marshal(dir)
	body := strings.ReplaceAll(ec.UpdateWeightsBody, "{path}", string(q[1:len(q)-1]))
	req, err := http.NewRequestWithContext(ctx, ec.UpdateWeightsMethod, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return fmt.Errorf("engine reload call: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("engine reload %s %s: %w", ec.UpdateWeightsMethod, url, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("engine reload %s %s: HTTP %d: %s", ec.UpdateWeightsMethod, url, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	// SGLang answers 200 with {"success": false, "message": ...} when the load failed.
	var r struct {
		Success *bool  `json:"success"`
		Message string `json:"message"`
	}
	if json.Unmarshal(msg, &r) == nil && r.Success != nil && !*r.Success {
		return fmt.Errorf("engine reload %s %s: the engine says it failed: %s", ec.UpdateWeightsMethod, url, r.Message)
	}
	return nil
}
