package trainer

import (
	"context"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/metrics"
)

// loadConfig is the default configuration with the overrides applied; a
// configuration that does not load fails the test.
func loadConfig(t *testing.T, overrides []string) *config.Config {
	t.Helper()
	cfg, err := config.Load(nil, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startTrainer is a trainer on loadConfig(overrides); a trainer that does not
// start fails the test. The caller closes it.
func startTrainer(t *testing.T, overrides []string, opts Options) *Trainer {
	t.Helper()
	debug.FreeOSMemory() // the models of the tests before: returned to the system
	tr, err := New(context.Background(), loadConfig(t, overrides), opts)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// runToEnd runs tr to its last step and closes it; a failed run fails the
// test.
func runToEnd(t *testing.T, tr *Trainer) {
	t.Helper()
	if err := tr.Run(context.Background()); err != nil {
		tr.Close()
		t.Fatal(err)
	}
	tr.Close()
}

// loggedSteps are the steps of runDir/metrics.jsonl; a file that does not
// read or holds other than want steps fails the test, and so does a metric
// that docs/metrics.md does not list (checkListed).
func loggedSteps(t *testing.T, runDir string, want int) []metrics.Step {
	t.Helper()
	steps, err := metrics.ReadJSONL(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil || len(steps) != want {
		t.Fatalf("metrics: %d steps, %v", len(steps), err)
	}
	checkListed(t, steps)
	return steps
}
