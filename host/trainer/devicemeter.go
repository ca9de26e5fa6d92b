package trainer

import (
	"time"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// deviceMeter measures one step on the CUDA backend; nil on other devices.
type deviceMeter struct {
	cb *cuda.Backend
	c0 cuda.Counters
}

func startDeviceMeter(be gpu.Backend) *deviceMeter {
	cb, ok := be.(*cuda.Backend)
	if !ok || cb == nil {
		return nil
	}
	cb.SetEnqueueTiming(true) // perf/enqueue_s
	return &deviceMeter{cb: cb, c0: cb.Counters()}
}

// addTo puts the step's device metrics into vals; wall is the step's wall
// time. Nothing on a nil meter.
func (m *deviceMeter) addTo(vals map[string]float64, wall time.Duration) {
	if m == nil {
		return
	}
	d := m.cb.Counters().Sub(m.c0)
	vals[perfDeviceSyncs] = float64(d.Syncs)
	vals[perfHostToDeviceBytes] = float64(d.HostToDevice)
	vals[perfDeviceToHostBytes] = float64(d.DeviceToHost)
	vals[perfDeviceWait] = d.SyncWait.Seconds()
	vals[perfQueueWaits] = float64(d.QueueWaits)
	vals[perfDownloadWaits] = float64(d.DownloadWaits)
	vals[perfUploadTime] = d.UploadTime.Seconds()
	vals[perfEnqueueTime] = d.EnqueueTime.Seconds()
	vals[perfDeviceAllocs] = float64(d.Allocs)
	vals[perfAllocTime] = d.AllocTime.Seconds()
	if wall > 0 {
		vals[perfHostFrac] = d.HostFrac(wall.Seconds())
	}
}

// phase is a part of the step being metered (phaseStart): its counters at
// the start.
type phase struct {
	m  *deviceMeter
	c0 cuda.Counters
}

// phaseStart starts metering a part of the step; nothing on a nil meter.
func (m *deviceMeter) phaseStart() phase {
	if m == nil {
		return phase{}
	}
	return phase{m: m, c0: m.cb.Counters()}
}

// addTo puts the part's wait (waitKey) and the host's share of its wall
// time (fracKey) into vals; nothing when the step has no meter.
func (p phase) addTo(vals map[string]float64, waitKey, fracKey string, wall time.Duration) {
	if p.m == nil {
		return
	}
	d := p.m.cb.Counters().Sub(p.c0)
	vals[waitKey] = d.SyncWait.Seconds()
	if wall > 0 {
		vals[fracKey] = d.HostFrac(wall.Seconds())
	}
}

// enqueueTo puts the part's time in calls that queue work into vals under
// key; nothing when the step has no meter.
func (p phase) enqueueTo(vals map[string]float64, key string) {
	if p.m == nil {
		return
	}
	vals[key] = p.m.cb.Counters().Sub(p.c0).EnqueueTime.Seconds()
}
