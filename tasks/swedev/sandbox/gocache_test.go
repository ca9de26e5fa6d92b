package sandbox

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cacheState maps each file of a cache to its owner, mode and content hash.
func cacheState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%d %o %x", st.Uid, st.Mode&0o7777, sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// No cross-instance poisoning: the shared cache is warmed by the Manager alone, read-only to
// instances; what one instance writes, rewrites or removes in its cache is gone with it and
// never seen by another instance or the shared cache, and the shared entries do serve builds.
func TestGoCacheNoPoisoning(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the overlay layer needs root; not as root each instance has an empty cache of its own")
	}
	cache := filepath.Join(t.TempDir(), "gocache") // warmed by the first mode's Manager, used by all
	for _, mode := range []string{"bwrap", "ns", "rlimit"} {
		t.Run(mode, func(t *testing.T) {
			m, err := New(Config{Isolation: mode, GoCache: cache, GoCacheWarm: []string{"errors"}})
			if err != nil {
				t.Skipf("isolation %s does not work here: %v", mode, err)
			}
			defer m.Close()
			deadline := time.Now().Add(5 * time.Minute)
			for {
				if ms, _ := filepath.Glob(filepath.Join(cache, "rlhost-warm-*")); len(ms) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the cache was not warmed within 5 minutes")
				}
				time.Sleep(100 * time.Millisecond)
			}
			before := cacheState(t, cache)
			if len(before) < 10 {
				t.Fatalf("the warmed cache holds %d files", len(before))
			}
			for p, s := range before {
				if !strings.HasPrefix(s, "0 ") || strings.Fields(s)[1][len(strings.Fields(s)[1])-2:] != "44" {
					t.Fatalf("%s: %s; want root's and read-only to others", p, s)
				}
			}
			a, b := create(t, m, pyRepo), create(t, m, pyRepo)
			token := "rlhost-poison-" + newID()
			poison := `c=$GOCACHE; f=$(find "$c" -name '*-d' -type f | head -1); test -n "$f" || exit 9
if echo ` + token + ` > "$f"; then echo WROTE; fi
echo ` + token + ` > "$c/00/rlhost-poison" && echo ADDED
rm -f "$f" && echo REMOVED`
			ra := run(t, m, a, poison, Limits{})
			if strings.Contains(ra.Stdout, "WROTE") || !strings.Contains(ra.Stdout, "ADDED") || ra.ExitCode == 9 {
				t.Fatalf("instance a in its cache: %+v", short(ra))
			}
			rb := run(t, m, b, `test -e "$GOCACHE/00/rlhost-poison" && echo SEEN; grep -rl `+token+` "$GOCACHE" | head -1; `+
				`printf 'module m\n\ngo 1.21\n' > go.mod && printf 'package m\n\nimport "errors"\n\nvar E = errors.New("x")\n' > m.go && go build -x ./... 2>&1 | grep -c "/compile " || true`, Limits{})
			if strings.Contains(rb.Stdout, "SEEN") || strings.Contains(rb.Stdout, "/") {
				t.Fatalf("instance b sees a's writes: %+v", short(rb))
			}
			// m and nothing of the standard library is compiled: errors and its dependencies
			// come from the shared cache.
			if strings.TrimSpace(rb.Stdout) != "1" {
				t.Errorf("go build compiled %s packages, want 1 (the shared cache did not serve errors): %+v", strings.TrimSpace(rb.Stdout), short(rb))
			}
			if after := cacheState(t, cache); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatalf("the shared cache changed: %d files before, %d after", len(before), len(after))
			}
			_ = m.Delete(context.Background(), a)
		})
	}
}
