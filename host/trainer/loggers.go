package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/tracing"
)

// openLoggers opens the metric loggers of trainer.logger: console, jsonl (RUN_DIR/metrics.jsonl,
// appended to on resume) and mlflow.
func (t *Trainer) openLoggers(ctx context.Context, _ *opening) error {
	if !t.dp.lead() { // rank 0 logs the job's metrics
		t.logger = metrics.Multi()
		return nil
	}
	var ls []metrics.Logger
	for _, name := range t.cfg.Trainer.Logger {
		switch name {
		case "console":
			ls = append(ls, metrics.NewConsole(t.opts.Progress))
		case "jsonl":
			l, err := metrics.NewJSONL(filepath.Join(t.runDir, "metrics.jsonl"))
			if err != nil {
				return err
			}
			ls = append(ls, l)
		case "mlflow":
			uri := os.Getenv("MLFLOW_TRACKING_URI")
			if t.cfg.Trainer.MLflowTrackingURI != nil {
				uri = *t.cfg.Trainer.MLflowTrackingURI
			}
			if uri == "" {
				return fmt.Errorf("trainer: trainer.logger has mlflow but no server: set trainer.mlflow_tracking_uri or MLFLOW_TRACKING_URI")
			}
			l, err := metrics.NewMLflow(ctx, metrics.MLflowConfig{TrackingURI: uri, Experiment: t.cfg.Trainer.ProjectName,
				RunName: t.cfg.Experiment(), Params: flatten(t.cfg.Redacted())})
			if err != nil {
				return err
			}
			ls = append(ls, l)
		default:
			return fmt.Errorf("trainer: trainer.logger: unknown logger %q (known: console, jsonl, mlflow)", name)
		}
	}
	t.logger = metrics.Multi(ls...)
	return nil
}

func flatten(m map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if mm, ok := v.(map[string]any); ok {
			for k, x := range mm {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, x)
			}
			return
		}
		out[prefix] = fmt.Sprint(v)
	}
	walk("", m)
	return out
}

// openTracer starts the trace backends of actor_rollout_ref.rollout.trace (the local store by
// default). A default local backend that is not installed only warns; a backend the config
// names must start.
func (t *Trainer) openTracer(ctx context.Context, _ *opening) error {
	tc := t.cfg.ActorRolloutRef.Rollout.Trace
	token2text := tracing.Token2TextDefault(tc.Backend)
	if tc.Token2Text != nil {
		token2text = *tc.Token2Text
	}
	cfg := tracing.Config{Backends: tc.Backend, Token2Text: token2text, Seed: int64(t.cfg.Trainer.Seed),
		Project: t.cfg.Trainer.ProjectName, Experiment: t.cfg.Experiment(), RunName: t.cfg.Experiment(),
		RunID: filepath.Base(t.runDir), RunDir: t.runDir, Logger: t.log,
		Decode:        func(ids []int) string { return t.tk.Decode(ids, false) },
		BackendConfig: map[string]map[string]any{},
		Relay:         !t.dp.lead()} // the other ranks' spans are shipped by rank 0's tracer (shipRankTraces)
	if tc.MaxSamplesPerStep != nil {
		cfg.MaxSamplesPerStep = *tc.MaxSamplesPerStep
	}
	if id := metrics.RunID(t.logger); id != "" {
		uri := os.Getenv("MLFLOW_TRACKING_URI")
		if t.cfg.Trainer.MLflowTrackingURI != nil {
			uri = *t.cfg.Trainer.MLflowTrackingURI
		}
		cfg.BackendConfig["mlflow"] = map[string]any{"run_id": id, "tracking_uri": uri}
	}
	if b, err := json.Marshal(t.cfg.Redacted()); err == nil {
		cfg.RunConfigJSON = string(b)
	}
	tr, err := tracing.New(ctx, cfg, tracing.OpenPlugin(t.opts.Plugin))
	if err != nil && len(tc.Backend) == 0 && errors.Is(err, plugin.ErrNotInstalled) {
		t.log.Warn("rollout tracing is off: the default local trace backend (rlhost-trace-local) is not installed", "error", err)
		return nil
	}
	t.tracer = tr
	return err
}
