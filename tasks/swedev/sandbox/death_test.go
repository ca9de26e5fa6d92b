package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if root := os.Getenv("RLHOST_SANDBOX_DEATH_OWNER"); root != "" {
		deathOwner(root)
		return
	}
	os.Exit(m.Run())
}

// deathUIDBase is the per-instance uids of the death test's Managers: a range of their own,
// above the default's (61000 and the 100000 after it), so that a Manager of another process
// on this machine (a training run, another package's tests) never holds the uid the test
// watches and kills.
const deathUIDBase = 170000

// deathOwner is a Manager process that starts a long command and waits to be killed.
func deathOwner(root string) {
	m, err := New(Config{Root: root, Isolation: os.Getenv("RLHOST_SANDBOX_DEATH_ISOLATION"), UIDBase: deathUIDBase})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	info, err := m.Create(context.Background(), CreateRequest{Files: pyRepo})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	go m.Exec(context.Background(), info.ID, ExecRequest{Command: "sleep 300 & sleep 300"})
	in, _ := m.get(info.ID)
	for len(livePIDs(in.uid)) < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Println("ready", in.uid, in.dir)
	select {}
}

// When the process that owns the instances dies (SIGKILL: no clean-up runs), their commands
// die with it (bwrap, ns: the pid namespace ends) or at the latest when the next Manager on the
// same root starts, which also removes their working trees.
func TestOwnerDeathReclaims(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs the per-instance uid (root) to find the instance's processes")
	}
	eachIsolation(t, ownerDeath)
}

func ownerDeath(t *testing.T, mode string) {
	root, err := os.MkdirTemp("", "rlhost-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RLHOST_SANDBOX_DEATH_OWNER="+root, "RLHOST_SANDBOX_DEATH_ISOLATION="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "ready" {
		cmd.Process.Kill()
		t.Fatalf("owner process: %q", line)
	}
	uid, _ := strconv.Atoi(f[1])
	dir := f[2]
	if n := len(livePIDs(uid)); n < 2 {
		t.Fatalf("%d processes of the instance before the kill", n)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// With namespaces the kernel usually ends the instance's processes with their owner (an
	// owner killed while bubblewrap is still starting can leave the outer bwrap waiting); in
	// every mode the next Manager reclaims whatever is left (below).
	deadline := time.Now().Add(15 * time.Second) // the machine may be loaded
	for mode != "rlimit" && len(livePIDs(uid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if pids := livePIDs(uid); len(pids) > 0 && mode != "rlimit" {
		var desc []string
		for _, p := range pids {
			c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			name, _, _ := strings.Cut(string(c), "\x00")
			desc = append(desc, fmt.Sprintf("%d %s", p, name))
		}
		t.Logf("processes left after the owner died, for the next Manager: %s", strings.Join(desc, ", "))
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the working tree should still be there before a new Manager: %v", err)
	}
	m := newManager(t, Config{Root: root, UIDBase: deathUIDBase})
	_ = m
	if pids := livePIDs(uid); len(pids) > 0 {
		killUID(uid)
		t.Fatalf("processes %v of the dead owner's instance still run after a new Manager started", pids)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the dead owner's working tree %s was not removed: %v", filepath.Base(dir), err)
	}
}
