//go:build cudaemu && !cuda

package trainer

import (
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/weights"
)

// TestDeviceMeterCUDA: a training step (forward, backward, AdamW, the
// log-probs read back) of a real checkpoint on the CUDA backend (its
// emulator) gets the step metrics the trainer logs on trainer.device=cuda:
// the synchronisations and bytes it counted, a wait no longer than the
// step, and the host's share of the step in [0, 1], consistent with both.
func TestDeviceMeterCUDA(t *testing.T) {
	be := cuda.OpenEmulator()
	defer be.Close()
	be.SetQueueDepth(8) // the tiny step queues more than 8 ops between two synchronisations
	ck, err := weights.Load("../../gpu/model/testdata/tiny-llama")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(be, ck)
	if err != nil {
		t.Fatal(err)
	}
	m.EnableGrads()
	const B, T = 2, 6
	batch := model.Batch{B: B, T: T, Tokens: make([]int32, B*T), Targets: make([]int32, B*T)}
	dlogp := make([]float32, B*T)
	for n := range batch.Tokens {
		batch.Tokens[n] = int32(3 + 7*n%(m.Config.V-3))
		batch.Targets[n] = -1
	}
	for n := range batch.Targets {
		if n%T < T-1 {
			batch.Targets[n], dlogp[n] = batch.Tokens[n+1], -1/float32(B*T)
		}
	}
	a := m.NewActs(B, T)
	opt := model.NewAdamW(m, model.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MaxGradNorm: 1})

	start := time.Now()
	dev := startDeviceMeter(be)
	vals := map[string]float64{}
	// two parts of the step metered apart, as the trainer meters the
	// rollout and the update: the forward (its log-probs come down),
	// then the backward and AdamW
	fwd, fwdDev := time.Now(), dev.phaseStart()
	m.ZeroGrads()
	if err := m.Forward(a, batch); err != nil {
		t.Fatal(err)
	}
	fwdWall := time.Since(fwd)
	fwdDev.addTo(vals, perfGenDeviceWait, perfGenHostFrac, fwdWall)
	upd, updDev := time.Now(), dev.phaseStart()
	if err := m.Backward(a, dlogp, make([]float32, B*T)); err != nil {
		t.Fatal(err)
	}
	if _, err := opt.Update(m); err != nil {
		t.Fatal(err)
	}
	updWall := time.Since(upd)
	updDev.addTo(vals, perfUpdateDeviceWait, perfUpdateHostFrac, updWall)
	updDev.enqueueTo(vals, perfUpdateEnqueueTime)
	wall := time.Since(start)
	dev.addTo(vals, wall)
	t.Logf("step of %v: %v", wall, vals)

	for _, k := range []string{perfDeviceSyncs, perfHostToDeviceBytes, perfDeviceToHostBytes} {
		if vals[k] <= 0 {
			t.Errorf("%s = %v; a training step synchronises and copies both ways", k, vals[k])
		}
	}
	if qw, ok := vals[perfQueueWaits]; !ok || qw <= 0 {
		t.Errorf("%s = %v (logged %v); the step queues more than 8 ops between two synchronisations", perfQueueWaits, qw, ok)
	}
	w, ok := vals[perfDeviceWait]
	if !ok || w < 0 || w > wall.Seconds() {
		t.Errorf("%s = %v (logged %v) in a step of %v", perfDeviceWait, w, ok, wall)
	}
	// the times in uploads and in calls that queue work: the host's, apart
	// from its waits; the update's within the step's
	u, ok1 := vals[perfUploadTime]
	q, ok2 := vals[perfEnqueueTime]
	uq, ok3 := vals[perfUpdateEnqueueTime]
	n, ok4 := vals[perfDeviceAllocs]
	at, ok5 := vals[perfAllocTime]
	if !ok1 || !ok2 || !ok3 || u <= 0 || q <= 0 || uq <= 0 || uq > q || u+q+at > wall.Seconds()-w {
		t.Errorf("%s = %v, %s = %v, %s = %v (logged %v %v %v) in a step of %v waiting %v; the step uploads and launches",
			perfUploadTime, u, perfEnqueueTime, q, perfUpdateEnqueueTime, uq, ok1, ok2, ok3, wall, w)
	}
	// the first step on a fresh backend allocates (counted and timed)
	if !ok4 || !ok5 || n <= 0 || at <= 0 {
		t.Errorf("%s = %v, %s = %v (logged %v %v): the first step allocates", perfDeviceAllocs, n, perfAllocTime, at, ok4, ok5)
	}
	f, ok := vals[perfHostFrac]
	if want := 1 - w/wall.Seconds(); !ok || f < 0 || f > 1 || f != want {
		t.Errorf("%s = %v (logged %v); want 1 - wait/wall = %v", perfHostFrac, f, ok, want)
	}
	// each part's wait is within the step's and its part of the wall time,
	// the forward's includes the log-probs' download, and each part's share
	// is 1 - its wait / its wall time. The waits are seconds converted from
	// durations apart, so the parts' sum may exceed the step's by rounding:
	// within a nanosecond counts as within.
	const ns = 1e-9
	for _, p := range []struct {
		wait, frac string
		wall       time.Duration
	}{{perfGenDeviceWait, perfGenHostFrac, fwdWall}, {perfUpdateDeviceWait, perfUpdateHostFrac, updWall}} {
		pw, ok1 := vals[p.wait]
		pf, ok2 := vals[p.frac]
		if !ok1 || !ok2 || pw < 0 || pw > w+ns || pw > p.wall.Seconds() || pf != 1-min(1, pw/p.wall.Seconds()) {
			t.Errorf("%s = %v (logged %v), %s = %v (logged %v) in a part of %v of a step waiting %v", p.wait, pw, ok1, p.frac, pf, ok2, p.wall, w)
		}
	}
	if vals[perfGenDeviceWait] <= 0 || vals[perfGenDeviceWait]+vals[perfUpdateDeviceWait] > w+ns {
		t.Errorf("the parts waited %v and %v, the step %v: the forward's download waits", vals[perfGenDeviceWait], vals[perfUpdateDeviceWait], w)
	}
	// the log-probs came down: at least 4 bytes per scored row
	if got := vals[perfDeviceToHostBytes]; got < 4*float64(B*(T-1)) {
		t.Errorf("%s = %v, less than the step's %d log-probs", perfDeviceToHostBytes, got, B*(T-1))
	}
}
