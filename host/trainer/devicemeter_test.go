package trainer

import (
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/cpu"
)

// On a device other than cuda the step logs none of the device metrics
// (rather than zeros that would read as "never waited").
func TestDeviceMeterOnlyOnCUDA(t *testing.T) {
	m := startDeviceMeter(cpu.New())
	if m != nil {
		t.Fatalf("a meter on the CPU backend: %+v", m)
	}
	vals := map[string]float64{}
	m.addTo(vals, time.Second)
	m.phaseStart().addTo(vals, perfGenDeviceWait, perfGenHostFrac, time.Second)
	if len(vals) != 0 {
		t.Errorf("the CPU backend logged %v", vals)
	}
}
