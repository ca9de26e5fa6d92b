// Package progress draws progress bars with rate and ETA for long work. On a terminal the bar
// redraws in place; elsewhere (CI logs, files) it prints a line at most every few seconds and
// at the end, so logs stay readable. A bar can also say what the work waits on (Waiting): while
// it does, the bar redraws on its own, also when no unit finishes.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar is one progress bar. It is safe for concurrent use.
type Bar struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	label    string
	unit     string
	total    int64
	done     int64
	start    time.Time
	last     time.Time
	every    time.Duration
	finished bool
	drawn    int64 // done at the last draw, -1 before any
	now      func() time.Time
	waiting  func() string // what the work waits on ("" for nothing); nil: not asked
	stop     chan struct{} // ends the Waiting ticker
}

// New returns a bar for total units of work (0 if unknown) written to w. unit names what is
// counted ("rows", "tokens").
func New(w io.Writer, label string, total int64, unit string) *Bar {
	b := &Bar{w: w, label: label, total: total, unit: unit, now: time.Now, every: 5 * time.Second, drawn: -1}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
			b.every = 100 * time.Millisecond
		}
	}
	b.start = b.now()
	b.last = b.start
	return b
}

// Waiting sets the function that says what the work waits on (for example "waiting on
// rlhost-task-x Obs of trajectory s1-0-1 for 12s"), "" for nothing. The bar asks it at every
// draw and shows its answer after the counts; while the answer is not empty, the bar redraws
// every few seconds (on a terminal, ten times a second) even when no unit finishes.
func (b *Bar) Waiting(f func() string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting = f
	if b.stop != nil || b.finished || f == nil {
		return
	}
	b.stop = make(chan struct{})
	go b.tick(b.stop, b.every)
}

// tick redraws the bar every period while it waits on something.
func (b *Bar) tick(stop chan struct{}, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		b.mu.Lock()
		if !b.finished && b.waitingText() != "" {
			b.last = b.now()
			b.draw(false)
		}
		b.mu.Unlock()
	}
}

func (b *Bar) waitingText() string {
	if b.waiting == nil {
		return ""
	}
	return b.waiting()
}

// Add records n more units done.
func (b *Bar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if t := b.now(); t.Sub(b.last) >= b.every {
		b.last = t
		b.draw(false)
	}
}

// SetTotal changes the total (when it becomes known).
func (b *Bar) SetTotal(total int64) {
	b.mu.Lock()
	b.total = total
	b.mu.Unlock()
}

// Finish draws the final state and ends the line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	if b.stop != nil {
		close(b.stop)
	}
	if !b.tty && b.drawn == b.done {
		return // the last line printed already shows the end
	}
	b.draw(true)
}

// Line returns the text of the bar as it would be drawn now.
func (b *Bar) Line() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.line()
}

func (b *Bar) line() string {
	elapsed := b.now().Sub(b.start)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(b.done) / s
	}
	var sb strings.Builder
	sb.WriteString(b.label)
	if b.total > 0 {
		frac := float64(b.done) / float64(b.total)
		if frac > 1 {
			frac = 1
		}
		const width = 24
		filled := int(frac * width)
		fmt.Fprintf(&sb, " [%s%s] %3.0f%% %d/%d %s", strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
			frac*100, b.done, b.total, b.unit)
		if b.done < b.total && rate > 0 {
			eta := time.Duration(float64(b.total-b.done) / rate * float64(time.Second))
			fmt.Fprintf(&sb, " ETA %s", eta.Round(time.Second))
		}
	} else {
		fmt.Fprintf(&sb, " %d %s", b.done, b.unit)
	}
	fmt.Fprintf(&sb, " (%.0f %s/s, %s)", rate, b.unit, elapsed.Round(time.Millisecond))
	if w := b.waitingText(); w != "" && !b.finished {
		sb.WriteString(" — ")
		sb.WriteString(w)
	}
	return sb.String()
}

func (b *Bar) draw(final bool) {
	b.drawn = b.done
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", b.line())
		if final {
			fmt.Fprintln(b.w)
		}
		return
	}
	fmt.Fprintln(b.w, b.line())
}
