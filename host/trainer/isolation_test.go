package trainer

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/sdk/task"
)

type fixedInfo task.Info

func (f fixedInfo) Info(context.Context) (task.Info, error) { return task.Info(f), nil }

// A task declaring weak isolation is refused unless task.allow_weak_isolation is set, and
// then trained with a warning; any other task passes silently.
func TestCheckIsolation(t *testing.T) {
	weak := fixedInfo{Name: "swedev", Features: []string{task.FeatureScore, task.FeatureWeakIsolation}}
	strong := fixedInfo{Name: "swedev", Features: []string{task.FeatureScore}}
	for _, c := range []struct {
		info          fixedInfo
		allow         bool
		err, progress string
	}{
		{weak, false, "task.allow_weak_isolation=true", ""},
		{weak, true, "", "warning: task swedev declares weak isolation"},
		{strong, false, "", ""},
	} {
		var out bytes.Buffer
		err := checkIsolation(context.Background(), c.info, "swedev", c.allow, &out)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("allow=%v features %v: error %v, want %q", c.allow, c.info.Features, err, c.err)
		}
		if c.progress == "" && out.Len() != 0 || !strings.Contains(out.String(), c.progress) {
			t.Errorf("allow=%v features %v: progress %q, want %q", c.allow, c.info.Features, out.String(), c.progress)
		}
	}
}
