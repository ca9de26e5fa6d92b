// Command doccmds runs the shell blocks of the project's documents that are marked runnable, as
// they are written (with the changes their marker states), on a fresh copy of the checkout:
// the files git tracks, as they are in the working tree, with ../shared beside the copy as
// beside a clone. docs/runnable-docs.md says how a block is marked; `make test-doc-commands`
// runs it on README.md and docs/*.md.
//
//	go run ./scripts/doccmds [-list] [-keep] [-root DIR] [-timeout 10m] README.md docs/*.md
//
// Each command runs with bash in the copy's root, one after another, block after block, in the
// order of the files given; a block stops at its first failing command and the runner goes on
// with the next block. It exits 1 if a command failed, naming its file and line.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	list := flag.Bool("list", false, "print the runnable blocks and the commands as they would run, and stop")
	keep := flag.Bool("keep", false, "keep the copy of the checkout (its path is printed)")
	root := flag.String("root", ".", "the checkout whose tracked files are copied")
	timeout := flag.Duration("timeout", 10*time.Minute, "the longest a command may run (a block's timeout rule overrides it)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: doccmds [-list] [-keep] [-root DIR] [-timeout D] FILE.md ...")
		os.Exit(2)
	}
	var blocks []Block
	for _, f := range flag.Args() {
		b, err := os.ReadFile(filepath.Join(*root, f))
		if err != nil {
			fail(err)
		}
		bs, err := Parse(f, b)
		if err != nil {
			fail(err)
		}
		blocks = append(blocks, bs...)
	}
	if len(blocks) == 0 {
		fail(errors.New("no block is marked runnable in " + strings.Join(flag.Args(), " ")))
	}
	if *list {
		for _, b := range blocks {
			fmt.Printf("%s:%d\n", b.File, b.Line)
			for _, s := range b.Steps() {
				fmt.Printf("  %d: %s%s\n", s.Line, s.Run, describe(s))
			}
		}
		return
	}
	dir, err := freshCopy(*root)
	if err != nil {
		fail(err)
	}
	if *keep {
		fmt.Println("doccmds: the copy of the checkout is", dir)
	} else {
		defer os.RemoveAll(filepath.Dir(dir))
	}
	failed := 0
	start := time.Now()
	for _, b := range blocks {
		fmt.Printf("== %s:%d\n", b.File, b.Line)
		for _, s := range b.Steps() {
			if s.Skip != "" {
				fmt.Printf("-- %s:%d: not run: %s (%s)\n", b.File, s.Line, s.Run, s.Skip)
				continue
			}
			t0 := time.Now()
			fmt.Printf("$ %s\n", s.Run)
			d := *timeout
			if s.Timeout > 0 {
				d = s.Timeout
			}
			var err error
			if s.Serve {
				err = serve(dir, s.Run, d)
			} else {
				err = runCommand(dir, s.Run, d)
			}
			if err != nil {
				fmt.Printf("doccmds: FAIL %s:%d: %s: %v\n", b.File, s.Line, s.Run, err)
				failed++
				break
			}
			fmt.Printf("-- %s:%d: ok in %s\n", b.File, s.Line, time.Since(t0).Round(100*time.Millisecond))
		}
	}
	fmt.Printf("doccmds: %d blocks in %s, %d failed\n", len(blocks), time.Since(start).Round(time.Second), failed)
	if failed > 0 {
		if !*keep {
			os.RemoveAll(filepath.Dir(dir))
		}
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "doccmds:", err)
	os.Exit(1)
}

func describe(s Step) string {
	switch {
	case s.Skip != "":
		return "   [not run: " + s.Skip + "]"
	case s.Serve:
		return "   [served: its URL is fetched, then it is stopped]"
	}
	return ""
}

// freshCopy copies the files git tracks in root, as they are in the working tree, into a new
// temporary folder T/NAME (NAME the checkout's folder name) and links T/shared to root's
// ../shared when there is one, as a clone in CI has it beside. It returns T/NAME.
func freshCopy(root string) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	out, err := exec.Command("git", "-C", abs, "ls-files", "-z", "--cached").Output()
	if err != nil {
		return "", fmt.Errorf("git ls-files in %s: %v", abs, err)
	}
	tmp, err := os.MkdirTemp("", "doccmds-")
	if err != nil {
		return "", err
	}
	dst := filepath.Join(tmp, filepath.Base(abs))
	n := 0
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(abs, rel)
		st, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) { // deleted in the working tree
			continue
		}
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return "", err
		}
		if err := copyFile(src, filepath.Join(dst, rel), st); err != nil {
			return "", err
		}
		n++
	}
	if shared, err := filepath.EvalSymlinks(filepath.Join(abs, "..", "shared")); err == nil {
		if err := os.Symlink(shared, filepath.Join(tmp, "shared")); err != nil {
			return "", err
		}
	}
	fmt.Printf("doccmds: %d tracked files of %s copied to %s\n", n, abs, dst)
	return dst, nil
}

func copyFile(src, dst string, st os.FileInfo) error {
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	if !st.Mode().IsRegular() {
		return nil // a submodule's folder
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, st.Mode().Perm())
}

// command is bash running line in dir, in a process group of its own (so that a timeout
// stops what it started too), with a plugin path of the copy's own.
func command(ctx context.Context, dir, line string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(withoutEnv(os.Environ(), "RLHOST_PLUGIN_PATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"), "PWD="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

func runCommand(dir, line string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := command(ctx, dir, line)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("still running after %s (stopped)", d)
	}
	return err
}

var urlRE = regexp.MustCompile(`https?://[^\s)]+`)

// serve runs a command that serves until it is stopped: it must print a URL within d, and the
// URL must answer 200; then the command is interrupted (SIGINT, as Ctrl-C) and must exit.
func serve(dir, line string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := command(ctx, dir, line)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	found := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Println(sc.Text())
			if u := urlRE.FindString(sc.Text()); u != "" {
				select {
				case found <- u:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); pw.Close() }()
	var err error
	select {
	case u := <-found:
		err = fetch(ctx, u)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cancel()
			<-exited
			if err == nil {
				err = errors.New("did not stop within 30 s of SIGINT")
			}
		}
	case werr := <-exited:
		err = fmt.Errorf("exited before it printed a URL: %v", werr)
	case <-ctx.Done():
		<-exited
		err = fmt.Errorf("printed no URL within %s (stopped)", d)
	}
	wg.Wait()
	return err
}

func fetch(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %v", u, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("GET %s: %s, %d bytes", u, resp.Status, len(body))
	}
	fmt.Printf("doccmds: GET %s: %s, %d bytes\n", u, resp.Status, len(body))
	return nil
}
