//go:build cudaemu && !cuda

package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
)

func TestMain(m *testing.M) {
	if err := cpu.EnsureCoreType(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(m.Run())
}

// openEmulator is OpenEmulator, closed when the test ends.
func openEmulator(t testing.TB) *Backend {
	be := OpenEmulator()
	t.Cleanup(func() {
		if err := be.Close(); err != nil {
			t.Errorf("closing the emulator: %v", err)
		}
	})
	return be
}

var sink float32

// TestEmulatorMemoryFaultsOnHostAccess: emulated device memory is not the
// host's, outside Upload and Download, as on a GPU. Every emulator test
// (the checks and TestTransfer...) therefore fails if model code reads or
// writes a tensor on the host.
func TestEmulatorMemoryFaultsOnHostAccess(t *testing.T) {
	be := openEmulator(t)
	x := be.Alloc("x", 16)
	be.Upload(x, []float32{1, 2, 3, 4})
	got := make([]float32, 4)
	be.Download(got, x)
	if got[3] != 4 {
		t.Fatalf("Download after Upload: %v", got)
	}
	faulted := func(f func()) (ok bool) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { ok = recover() != nil }()
		f()
		return false
	}
	if !faulted(func() { sink = x[3] }) {
		t.Error("the host read a tensor of the emulated device without a fault")
	}
	if !faulted(func() { x[2] = 1 }) {
		t.Error("the host wrote a tensor of the emulated device without a fault")
	}
}

// TestEmulatorMemoryReleased: an emulated device gives its memory back.
// A workload run twice on one device (resident tensors allocated and
// freed, host operands staged) needs no more of the emulator's memory the
// second time (freed blocks are reused), and once closed a device leaves
// no region, block or byte behind, K times over; an op on a closed backend
// fails with ErrClosed.
func TestEmulatorMemoryReleased(t *testing.T) {
	run := func(be *Backend) {
		const N, C, OC = 64, 96, 80
		r := rand.New(rand.NewPCG(1, 2))
		vec := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			return x
		}
		inp := vec(N * C)
		be.MatmulForward(make([]float32, N*OC), inp, vec(C*OC), nil, N, C, OC) // host operands, staged
		x, w, rstd, y := be.Alloc("x", N*C), be.Alloc("w", C), be.Alloc("rstd", N), be.Alloc("y", N*C)
		be.Upload(x, inp)
		be.Upload(w, vec(C))
		be.RMSNormForward(y, rstd, x, w, N, C, 1e-5)
		be.Download(make([]float32, N*C), y)
		for _, t := range [][]float32{x, w, rstd, y} {
			be.Free(t)
		}
	}
	before := emuStatsNow()
	for k := range 4 {
		be := OpenEmulator()
		run(be)
		m := be.d.drv.(emuDriver).m
		top := m.Used()
		run(be)
		if m.Used() != top {
			t.Errorf("device %d: the checks run again moved the top of its memory from %d to %d bytes", k, top, m.Used())
		}
		kept := be.Alloc("left allocated at Close", 1<<20)
		open := emuStatsNow()
		if open.Regions != before.Regions+1 || open.Blocks <= before.Blocks || open.Bytes < before.Bytes+int64(len(kept))*4 {
			t.Fatalf("device %d open: %+v, before it %+v: the accounting does not see its memory", k, open, before)
		}
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
		if got := emuStatsNow(); got != before {
			t.Fatalf("device %d closed: %+v of emulated device memory left, want %+v", k, got, before)
		}
		if err := be.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		func() {
			defer func() {
				e, ok := recover().(*Error)
				if !ok || !errors.Is(e, ErrClosed) {
					t.Errorf("Upload on a closed backend: panic %v, want an *Error wrapping ErrClosed", e)
				}
			}()
			be.Upload(kept, []float32{1})
		}()
	}
}
