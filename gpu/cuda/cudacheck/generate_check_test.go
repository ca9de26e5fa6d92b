package cudacheck_test

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// prefixDefect is a Device whose copies within the KV cache (the generator's
// prefix copies, model.Generator's copyPrefix) are planted with a defect:
//
//	short      the last position of the prefix is not copied
//	wrong-slot the keys and values come from another slot than the source's
//	skipped    nothing is copied: the slot keeps what it held
//
// Every other op, and every copy outside the KV cache, is the device's.
type prefixDefect struct {
	cudacheck.Device
	kind string
	kv   [][]float32 // the KV cache tensors allocated through it
}

func (d *prefixDefect) Alloc(name string, n int) []float32 {
	x := d.Device.Alloc(name, n)
	if strings.HasPrefix(name, "KV cache") {
		d.kv = append(d.kv, x)
	}
	return x
}

func (d *prefixDefect) Copy(dst, src []float32) {
	const slot = checkutil.GroupsMaxT * 16 // floats of one slot of groupsConfig's cache (NKV*HD = 16)
	n := min(len(dst), len(src))
	for _, kv := range d.kv {
		off := (uintptr(unsafe.Pointer(unsafe.SliceData(src))) - uintptr(unsafe.Pointer(unsafe.SliceData(kv)))) / 4
		if n == 0 || off >= uintptr(len(kv)) {
			continue
		}
		switch d.kind {
		case "short":
			d.Device.Copy(dst[:n-16], src[:n-16])
		case "wrong-slot": // the slot after src's, or the one after that where it is dst's
			to := int((uintptr(unsafe.Pointer(unsafe.SliceData(dst))) - uintptr(unsafe.Pointer(unsafe.SliceData(kv)))) / 4)
			from := (int(off) + slot) % len(kv)
			if from/slot == to/slot {
				from = (from + slot) % len(kv)
			}
			d.Device.Copy(dst[:n], kv[from:from+n])
		case "skipped":
		default:
			panic("prefixDefect: unknown defect " + d.kind)
		}
		return
	}
	d.Device.Copy(dst, src)
}

// prefixDefects are the planted defects of the prefix copies.
var prefixDefects = []string{"short", "wrong-slot", "skipped"}

// checkGroupsDetects requires checkGenerateGroups to fail on d with each
// of the prefix-copy defects kinds planted.
func checkGroupsDetects(t *testing.T, d func() cudacheck.Device, kinds ...string) {
	t.Helper()
	for _, kind := range kinds {
		pd := &prefixDefect{Device: d(), kind: kind}
		err := cudacheck.CheckGenerateGroups(pd)
		if len(pd.kv) == 0 {
			t.Fatalf("%s: the generator allocated no KV cache through the device", kind)
		}
		if err == nil {
			t.Errorf("prefix copy %s: GenerateGroups did not detect it", kind)
			continue
		}
		t.Logf("prefix copy %s: %v", kind, err)
	}
}

// TestGenerateGroupsDetectsPrefixDefects: with gpu/cpu as the device,
// GenerateGroups passes (TestChecksPassOnReference), and a prefix copy of
// one position fewer, from the wrong slot or not made at all, and prefix
// sharing switched off on both sides, each make it fail (the emulator's
// TestGenerateGroupsPlantedEmulator plants the first on the kernels).
func TestGenerateGroupsDetectsPrefixDefects(t *testing.T) {
	checkGroupsDetects(t, func() cudacheck.Device { return &cpuDevice{} }, prefixDefects...)
	checkutil.PlantNoPrefixSharing = true
	defer func() { checkutil.PlantNoPrefixSharing = false }()
	if err := cudacheck.CheckGenerateGroups(&cpuDevice{}); err == nil || !strings.Contains(err.Error(), "no prompt token shared") {
		t.Errorf("prefix sharing off: GenerateGroups gave %v, want its no-sharing error", err)
	} else {
		t.Logf("prefix sharing off: %v", err)
	}
}
