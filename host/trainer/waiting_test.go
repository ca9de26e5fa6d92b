package trainer

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/progress"
	"github.com/rlhost/rlhost/sdk/task"
)

// While a task plugin's call has been in flight for waitReport or longer, the progress line
// says which plugin, call and trajectory the run waits on, and for how long.
func TestProgressNamesTheCallWaitedOn(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rlhost-task-fixture")
	cmd := exec.Command("go", "build", "-o", bin, "-ldflags", "-X main.mode=hangobs", "./conformance/testdata/fixture")
	cmd.Dir = filepath.Join("..", "..", "sdk")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the fixture: %v\n%s", err, out)
	}
	ctx := context.Background()
	p, err := plugin.OpenTaskBinaryWith(ctx, plugin.Binary{Kind: "task", Name: "fixture", Path: bin}, nil, plugin.Options{},
		plugin.TaskOptions{Timeouts: plugin.Timeouts{Obs: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := &taskSet{list: []*runTask{{name: "fixture", p: p}}}
	old := waitReport
	waitReport = 300 * time.Millisecond
	defer func() { waitReport = old }()

	st, err := p.Start(ctx, task.StartRequest{TrajectoryID: "s4-1-0", Row: task.Row{DataSource: "fixture"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	bar := progress.New(&out, "step 4/9 rollout", 2, "trajectories")
	bar.Waiting(s.waitingOn)
	if w := s.waitingOn(); w != "" {
		t.Fatalf("waiting on %q before any call", w)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if w := s.waitingOn(); w != "" {
		t.Errorf("waiting on %q after 100ms; want nothing before waitReport", w)
	}
	time.Sleep(1400 * time.Millisecond)
	want := "waiting on rlhost-task-fixture Obs of trajectory s4-1-0 for " // then 2s, more on a loaded machine
	if w := s.waitingOn(); !strings.HasPrefix(w, want) || !strings.HasSuffix(w, "s") {
		t.Errorf("waitingOn: %q, want %q and the seconds", w, want)
	}
	if line := bar.Line(); !strings.Contains(line, "2 trajectories") || !strings.Contains(line, " — "+want) {
		t.Errorf("progress line %q does not say %q", line, want)
	}
	if err := <-done; err == nil {
		t.Error("the Obs of a hanging plugin succeeded")
	}
	bar.Finish()
	if w := s.waitingOn(); w != "" {
		t.Errorf("waiting on %q after the call ended", w)
	}
}
