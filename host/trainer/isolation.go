package trainer

import (
	"context"
	"fmt"
	"io"

	"github.com/rlhost/rlhost/sdk/task"
)

// infoer is what checkIsolation needs of a task plugin.
type infoer interface {
	Info(ctx context.Context) (task.Info, error)
}

// checkIsolation asks the configured task plugin (a fresh Info, after Configure) whether its
// environment can keep this machine's files from the policy. When it says it cannot
// (task.FeatureWeakIsolation), training is refused unless task.allow_weak_isolation is set,
// and a warning is printed when it is.
func checkIsolation(ctx context.Context, p infoer, name string, allow bool, progress io.Writer) error {
	info, err := p.Info(ctx)
	if err != nil {
		return fmt.Errorf("trainer: task %s: Info: %w", name, err)
	}
	if !info.Has(task.FeatureWeakIsolation) {
		return nil
	}
	msg := fmt.Sprintf("task %s declares weak isolation: the policy's commands may read this machine's files, the dataset's hidden tests and answers included (see docs/security.md)", name)
	if !allow {
		return fmt.Errorf("trainer: %s; fix the isolation (for swedev: install bubblewrap with make setup-swedev, or run as root) or set task.allow_weak_isolation=true to train anyway", msg)
	}
	fmt.Fprintf(progress, "warning: %s; training anyway (task.allow_weak_isolation=true)\n", msg)
	return nil
}
