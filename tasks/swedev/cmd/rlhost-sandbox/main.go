// Command rlhost-sandbox serves swedev sandbox instances over HTTP (127.0.0.1:8790 by
// default): create an instance from a repository snapshot, run commands in it under limits
// and without network, read, write and patch its files, run its tests, delete it. Instances
// whose lease runs out are deleted. See docs/swedev.md and package sandbox.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rlhost/rlhost/tasks/swedev/sandbox"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8790", "listen address (anything but loopback needs -token)")
	root := flag.String("root", "", "directory of the working trees (default a new temporary one)")
	maxInst := flag.Int("max-instances", 64, "instances alive at once")
	slots := flag.Int("slots", 0, "commands running at once; the rest queue (default 2 x CPUs)")
	lease := flag.Duration("lease", 10*time.Minute, "default lease of an instance")
	iso := flag.String("isolation", "", "bwrap, ns or rlimit (default the strongest that works)")
	token := flag.String("token", os.Getenv("RLHOST_SANDBOX_TOKEN"), "bearer token clients must send (env RLHOST_SANDBOX_TOKEN)")
	var roBinds []string
	flag.Func("ro-bind", "an absolute host path the instances also see, read-only at the same place (repeatable)", func(p string) error {
		roBinds = append(roBinds, p)
		return nil
	})
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatalf("rlhost-sandbox: -addr %q: %v", *addr, err)
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && *token == "" {
		log.Fatalf("rlhost-sandbox: -addr %s is not loopback: set -token (or RLHOST_SANDBOX_TOKEN)", *addr)
	}
	m, err := sandbox.New(sandbox.Config{Root: *root, MaxInstances: *maxInst, Slots: *slots, Lease: *lease, Isolation: *iso, ReadOnlyBinds: roBinds})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		m.Close()
		log.Fatalf("rlhost-sandbox: %v", err)
	}
	srv := &http.Server{Handler: (&sandbox.Server{M: m, Token: *token}).Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "rlhost-sandbox: serving on http://%s (isolation %s, root %s)\n", ln.Addr(), m.Isolation(), m.Root())
	if m.WeakIsolation() {
		fmt.Fprintf(os.Stderr, "rlhost-sandbox: warning: isolation %s has no file system view: commands see this machine's files (install bubblewrap or run as root; docs/security.md)\n", m.Isolation())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Print(err)
	}
	m.Close()
}
