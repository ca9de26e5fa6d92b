package genchat

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// The example environment's calculator tool evaluates arithmetic only and bounds its numbers,
// so that a model cannot stall the environment with a nested power (docs/security.md):
// examples/genchat-env/test_calculator.py, run with the environment's Python when set.
func TestExampleCalculatorBounded(t *testing.T) {
	py := os.Getenv("RLHOST_GENCHAT_PYTHON")
	if py == "" {
		py = "python3"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "test_calculator.py")
	cmd.Dir = "../../examples/genchat-env"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s test_calculator.py: %v\n%s", py, err, out)
	}
}
