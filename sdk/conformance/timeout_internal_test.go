package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The server-side deadline can end a hanging call just before the client's context timer
// fires; that must still be reported as a hang, and a plugin's own early DeadlineExceeded not.
func TestTimedOut(t *testing.T) {
	rpcDeadline := fmt.Errorf("Info: %w", status.Error(codes.DeadlineExceeded, "stream terminated by RST_STREAM with error code: CANCEL"))
	const budget = 2 * time.Second

	near, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if !timedOut(near, rpcDeadline, budget) {
		t.Error("DeadlineExceeded status 50ms before the deadline: not counted as a hang")
	}
	far, cancel2 := context.WithTimeout(context.Background(), budget)
	defer cancel2()
	if timedOut(far, rpcDeadline, budget) {
		t.Error("DeadlineExceeded status returned at once: counted as a hang")
	}
	if timedOut(far, errors.New("Info: plugin said no"), budget) || timedOut(near, nil, budget) {
		t.Error("an ordinary error or no error counted as a hang")
	}
	expired, cancel3 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel3()
	<-expired.Done()
	if !timedOut(expired, errors.New("Info: context deadline exceeded"), budget) {
		t.Error("an error after the context's deadline: not counted as a hang")
	}
}
