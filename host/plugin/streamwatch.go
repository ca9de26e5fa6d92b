package plugin

import (
	"context"
	"sync"
	"time"
)

// streamWatch bounds the wait for each answer of a stream (Preprocess): the record sent
// longest ago without an answer must be answered within limit of its sending, or of the last
// answer when the plugin is working through a backlog. Answers may come in any order, so they
// are matched to records first in, first out.
type streamWatch struct {
	limit time.Duration

	mu    sync.Mutex
	queue []sentRecord // unanswered, oldest first
	last  time.Time    // the last answer
	late  *int64       // the record that ran out of time
}

type sentRecord struct {
	index int64
	at    time.Time
}

func newStreamWatch(limit time.Duration) *streamWatch { return &streamWatch{limit: limit} }

// watch returns ctx cancelled when a record runs out of time, and the function that stops
// watching.
func (w *streamWatch) watch(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	if w.limit <= 0 {
		return ctx, cancel
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(min(max(w.limit/4, 10*time.Millisecond), time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				if w.check(now) {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel() }
}

// check reports whether the oldest unanswered record has run out of time at now.
func (w *streamWatch) check(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return false
	}
	from := w.queue[0].at
	if w.last.After(from) {
		from = w.last
	}
	if now.Sub(from) <= w.limit {
		return false
	}
	idx := w.queue[0].index
	w.late = &idx
	return true
}

func (w *streamWatch) sent(index int64) {
	w.mu.Lock()
	w.queue = append(w.queue, sentRecord{index, time.Now()})
	w.mu.Unlock()
}

func (w *streamWatch) answered() {
	w.mu.Lock()
	if len(w.queue) > 0 {
		w.queue = w.queue[1:]
	}
	w.last = time.Now()
	w.mu.Unlock()
}

// lateRecord returns the record that ran out of time, or nil.
func (w *streamWatch) lateRecord() *int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.late
}
