package trainer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run started from scratch (resume_mode=disable) in a directory that holds an earlier
// run is refused before anything in it is touched: it would otherwise append its steps to
// the old metrics.jsonl and trace store and overwrite the old checkpoints.
func TestFreshRunRefusesUsedRunDir(t *testing.T) {
	for _, tc := range []struct {
		name, make, want string
	}{
		{"metrics", "metrics.jsonl", "metrics.jsonl"},
		{"traces", "traces/", "traces"},
		{"checkpoint", "checkpoints/global_step_7/", "checkpoints/global_step_7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			p := filepath.Join(dir, tc.make)
			if strings.HasSuffix(tc.make, "/") {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(`{"step":1}`+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			old := []byte("old config\n")
			if err := os.WriteFile(filepath.Join(dir, "config.yaml"), old, 0o644); err != nil {
				t.Fatal(err)
			}
			tr, err := New(context.Background(), loadConfig(t, []string{"task.name=gsm8k", "trainer.resume_mode=disable", "trainer.run_dir=" + dir}), Options{})
			if err == nil {
				tr.Close()
				t.Fatal("a fresh run was started in a used run directory")
			}
			for _, s := range []string{dir, tc.want, "trainer.resume_mode=auto"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); string(b) != string(old) {
				t.Errorf("config.yaml was rewritten: %q", b)
			}
		})
	}
	// A directory with only a config (or an unfinished checkpoint) holds no run.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "checkpoints", "global_step_3.tmp"), 0o755)
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("x\n"), 0o644)
	tr := &Trainer{runDir: dir}
	if err := tr.checkFreshRunDir(); err != nil {
		t.Errorf("a directory without a run was refused: %v", err)
	}
}
