package progress

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBarLineAndETA(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(1000, 0)
	b := New(&buf, "preprocess train", 100, "rows")
	b.now = func() time.Time { return clock }
	b.start = clock
	clock = clock.Add(10 * time.Second)
	b.Add(25) // 2.5 rows/s; 75 left -> 30s
	line := b.Line()
	for _, want := range []string{"preprocess train", "25%", "25/100 rows", "ETA 30s", "(2 rows/s"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
	clock = clock.Add(30 * time.Second)
	b.Add(75)
	b.Finish()
	b.Finish() // once only
	out := buf.String()
	if !strings.Contains(out, "100%") || strings.Count(out, "100/100") != 1 || strings.Contains(b.Line(), "ETA") {
		t.Errorf("output %q", out)
	}
}

func TestBarUnknownTotal(t *testing.T) {
	var buf bytes.Buffer
	b := New(&buf, "scoring", 0, "items")
	b.Add(7)
	b.Finish()
	if !strings.Contains(buf.String(), "scoring 7 items") {
		t.Errorf("got %q", buf.String())
	}
}

// A bar that waits on something says so, and redraws while it waits although no unit
// finishes; the final line does not carry it.
func TestBarWaiting(t *testing.T) {
	var buf syncWriter
	b := New(&buf, "step 1/3 rollout", 4, "trajectories")
	b.every = 20 * time.Millisecond
	var mu sync.Mutex
	what := ""
	b.Waiting(func() string { mu.Lock(); defer mu.Unlock(); return what })
	b.Add(1)
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(buf.String(), "\n"); n > 1 {
		t.Fatalf("the bar redrew %d times with nothing to wait on:\n%s", n, buf.String())
	}
	mu.Lock()
	what = "waiting on rlhost-task-x Obs of trajectory s1-0-1 for 6s"
	mu.Unlock()
	time.Sleep(150 * time.Millisecond)
	out := buf.String()
	if strings.Count(out, "waiting on rlhost-task-x Obs of trajectory s1-0-1 for 6s") < 2 || !strings.Contains(out, "1/4 trajectories") {
		t.Fatalf("while waiting, want repeated lines naming the call:\n%s", out)
	}
	b.Add(3)
	b.Finish()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "4/4") || strings.Contains(last, "waiting on") {
		t.Fatalf("final line %q", last)
	}
	n := strings.Count(buf.String(), "\n")
	time.Sleep(100 * time.Millisecond)
	if strings.Count(buf.String(), "\n") != n {
		t.Fatal("the bar drew after Finish")
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
