package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// leftovers lists what is in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// A real run stopped with Ctrl-C, as a terminal sends it (SIGINT to the whole process group:
// rlhost and its plugin processes), leaves no plugin socket or temporary folder behind, and
// neither does a run that ends by itself. TMPDIR is a fresh folder, so anything left is ours.
func TestRunLeavesNoTempFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	bin := filepath.Join(t.TempDir(), "rlhost")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tmp := t.TempDir()
	start := func(args ...string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "RLHOST_PLUGIN_PATH="+pluginDir, "TMPDIR="+tmp)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, as a shell job
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}

	// Ends by itself.
	cmd, out := start(tinyRun(t, filepath.Join(t.TempDir(), "done"), "trainer.total_training_steps=1", "trainer.val_before_train=false")...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	if l := leftovers(t, tmp); len(l) != 0 {
		t.Errorf("a finished run left %q in TMPDIR", l)
	}

	// Ctrl-C while the plugins serve: wait until a plugin's socket is in the run's folder.
	cmd, out = start(tinyRun(t, filepath.Join(t.TempDir(), "cut"), "trainer.total_training_steps=50")...)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		socks, _ := filepath.Glob(filepath.Join(tmp, "rlhost-*", "plugin*"))
		if len(socks) >= 2 { // the task and the trace store
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended before Ctrl-C (%v):\n%s", err, out)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no plugin socket under %s after 5 minutes:\n%s", tmp, out)
		}
	}
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Errorf("after Ctrl-C: %v, want exit status 130\n%s", err, out)
		}
	case <-time.After(2 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("rlhost did not stop within 2 minutes of Ctrl-C:\n%s", out)
	}
	if l := leftovers(t, tmp); len(l) != 0 {
		t.Errorf("Ctrl-C left %q in TMPDIR\n%s", l, out)
	}
}
