package trainer

import (
	"time"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// Step metrics of the CUDA backend (trainer.device=cuda), from its transfer
// counters (cuda.Counters) over one step. They are not logged on other
// devices.
const (
	// DeviceSyncs is the number of stream synchronisations of the step.
	DeviceSyncs = "perf/device_syncs"
	// HostToDeviceBytes and DeviceToHostBytes are the bytes copied each way.
	HostToDeviceBytes = "perf/host_to_device_bytes"
	DeviceToHostBytes = "perf/device_to_host_bytes"
	// DeviceWait is the host's time blocked on the device, in seconds: in
	// synchronisations, device->host copies, the waits that keep the host a
	// bounded number of ops ahead of the stream (QueueWaits) and those for
	// the samples (DownloadWaits).
	DeviceWait = "perf/device_wait_s"
	// QueueWaits is the step's waits for the stream that keep the host at
	// most cuda.QueueDepth ops ahead of it (docs/gpu.md, "A bounded
	// queue"), where the driver would otherwise hold it inside a launch.
	QueueWaits = "perf/queue_waits"
	// DownloadWaits is the step's waits for a decode step's samples alone
	// (the event after their copy to the host), while the next decode step
	// runs: overlap scheduling (docs/gpu.md, "Overlapping the host's work
	// with the device's"); not in DeviceSyncs.
	DownloadWaits = "perf/download_waits"
	// HostFrac is 1 - DeviceWait / timing_s/step: the share of the step's wall
	// time in which the host was not waiting on the device (host code between
	// kernels, the reward, the task plugins). The device can be idle only
	// when the host is not waiting on it, so this bounds its idle share from
	// above.
	HostFrac = "perf/host_frac"
	// UploadTime is the host's time in host->device copies, in seconds (the
	// copy into the backend's page-locked buffer included; a copy from
	// pageable memory that waits for the stream shows here, not in
	// DeviceWait: docs/gpu.md, "Uploads through page-locked memory").
	UploadTime = "perf/upload_s"
	// EnqueueTime is the host's time in the calls that queue work on the
	// stream (kernel launches, cuBLAS products, device copies and clears,
	// graph launches), in seconds: a call the driver holds because its
	// queue is full waits on the device there, not in DeviceWait.
	// UpdateEnqueueTime is the same over the actor's update.
	EnqueueTime = "perf/enqueue_s"
	// DeviceAllocs is the step's device allocations (cuMemAlloc) and
	// AllocTime the host's time in them, in seconds: a step meeting a
	// larger batch than any before allocates its tensors.
	DeviceAllocs      = "perf/device_allocs"
	AllocTime         = "perf/alloc_s"
	UpdateEnqueueTime = "perf/update_enqueue_s"
	// GenDeviceWait and GenHostFrac are DeviceWait and HostFrac over the
	// rollout alone (timing_s/gen: the generator, the agent loops, the task
	// plugin's calls), UpdateDeviceWait and UpdateHostFrac over the actor's
	// update (timing_s/update_actor): where in the step the host time is.
	GenDeviceWait    = "perf/gen_device_wait_s"
	GenHostFrac      = "perf/gen_host_frac"
	UpdateDeviceWait = "perf/update_device_wait_s"
	UpdateHostFrac   = "perf/update_host_frac"
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
	vals[DeviceSyncs] = float64(d.Syncs)
	vals[HostToDeviceBytes] = float64(d.HostToDevice)
	vals[DeviceToHostBytes] = float64(d.DeviceToHost)
	vals[DeviceWait] = d.SyncWait.Seconds()
	vals[QueueWaits] = float64(d.QueueWaits)
	vals[DownloadWaits] = float64(d.DownloadWaits)
	vals[UploadTime] = d.UploadTime.Seconds()
	vals[EnqueueTime] = d.EnqueueTime.Seconds()
	vals[DeviceAllocs] = float64(d.Allocs)
	vals[AllocTime] = d.AllocTime.Seconds()
	if wall > 0 {
		vals[HostFrac] = d.HostFrac(wall.Seconds())
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
