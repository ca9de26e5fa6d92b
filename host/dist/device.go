package dist

import (
	"context"

	"github.com/rlhost/rlhost/gpu"
)

// OnDevice is c for buffers in be's memory: each collective copies its buffers down to the
// host, runs c there and copies the results back. NCCL reads and writes device memory
// itself; the host communicators (NewLocal, host/dist/socktest) cannot, so a simulated job
// whose ranks drive devices (the CUDA backend's emulator) runs them through OnDevice. The
// in-place forms keep their meaning: send is copied down before recv is written back. A
// backend of host memory (gpu/cpu) needs none.
func OnDevice(c Comm, be gpu.Backend) Comm { return deviceComm{c, be} }

type deviceComm struct {
	Comm
	be gpu.Backend
}

func (d deviceComm) down(x []float32) []float32 {
	h := make([]float32, len(x))
	d.be.Download(h, x)
	return h
}

func (d deviceComm) AllReduce(ctx context.Context, buf []float32, op Op) error {
	h := d.down(buf)
	if err := d.Comm.AllReduce(ctx, h, op); err != nil {
		return err
	}
	d.be.Upload(buf, h)
	return nil
}

func (d deviceComm) Broadcast(ctx context.Context, buf []float32, root int) error {
	h := d.down(buf)
	if err := d.Comm.Broadcast(ctx, h, root); err != nil {
		return err
	}
	d.be.Upload(buf, h)
	return nil
}

func (d deviceComm) AllGather(ctx context.Context, send, recv []float32) error {
	h := make([]float32, len(recv))
	if err := d.Comm.AllGather(ctx, d.down(send), h); err != nil {
		return err
	}
	d.be.Upload(recv, h)
	return nil
}

func (d deviceComm) ReduceScatter(ctx context.Context, send, recv []float32, op Op) error {
	h := make([]float32, len(recv))
	if err := d.Comm.ReduceScatter(ctx, d.down(send), h, op); err != nil {
		return err
	}
	d.be.Upload(recv, h)
	return nil
}
