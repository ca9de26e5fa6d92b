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
	m.ZeroGrads()
	if err := m.Forward(a, batch); err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(a, dlogp, make([]float32, B*T)); err != nil {
		t.Fatal(err)
	}
	if _, err := opt.Update(m); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	vals := map[string]float64{}
	dev.addTo(vals, wall)
	t.Logf("step of %v: %v", wall, vals)

	for _, k := range []string{DeviceSyncs, HostToDeviceBytes, DeviceToHostBytes} {
		if vals[k] <= 0 {
			t.Errorf("%s = %v; a training step synchronises and copies both ways", k, vals[k])
		}
	}
	w, ok := vals[DeviceWait]
	if !ok || w < 0 || w > wall.Seconds() {
		t.Errorf("%s = %v (logged %v) in a step of %v", DeviceWait, w, ok, wall)
	}
	f, ok := vals[HostFrac]
	if want := 1 - w/wall.Seconds(); !ok || f < 0 || f > 1 || f != want {
		t.Errorf("%s = %v (logged %v); want 1 - wait/wall = %v", HostFrac, f, ok, want)
	}
	// the log-probs came down: at least 4 bytes per scored row
	if got := vals[DeviceToHostBytes]; got < 4*float64(B*(T-1)) {
		t.Errorf("%s = %v, less than the step's %d log-probs", DeviceToHostBytes, got, B*(T-1))
	}
}
