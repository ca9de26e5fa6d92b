package rollout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// PushTensor is one tensor of a weight push: its Hugging Face name, dtype name as vLLM
// spells it ("bfloat16", "float32"), shape, and what the transport sends (device memory
// on a GPU).
type PushTensor struct {
	Name  string
	DType string
	Shape []int
	Data  any
}

// WeightGroup is one NCCL group from the trainer, rank 0, to an engine's workers (ranks 1
// and up).
type WeightGroup interface {
	// Warm runs the one-element float32 all-reduce that the workers' communicator runs as
	// it opens (vLLM's PyNcclCommunicator), before the first broadcast.
	Warm(ctx context.Context) error
	// Broadcast sends t from rank 0 to every rank of the group.
	Broadcast(ctx context.Context, t PushTensor) error
	// Abort frees the group without waiting for its peers (ncclCommAbort).
	Abort()
}

// WeightTransport opens WeightGroups: NCCL on the trainer's GPU.
type WeightTransport interface {
	// UniqueID is a new group's id (ncclGetUniqueId: 128 bytes).
	UniqueID() ([]byte, error)
	// Open joins the group of id as rank 0 of world ranks; it returns once every rank
	// has joined (ncclCommInitRank).
	Open(ctx context.Context, id []byte, world int) (WeightGroup, error)
}

// VLLMPush hands each engine of a fleet the new weights after a step through vLLM's
// RL weight-transfer API (written against vLLM v0.30.0; the server runs with
// VLLM_SERVER_DEV_MODE=1 and --weight-transfer-config '{"backend":"nccl"}'), instead of
// a checkpoint saved and reloaded. A group is opened per engine on its first push and
// kept: GET /get_world_size, then POST /init_weight_transfer_engine with the group's id
// (nccl_unique_id_b64: the path for trainers without PyTorch) while this side joins as
// rank 0 and runs the warm-up all-reduce. A push of version v: POST /pause?mode=wait (the
// draws in flight finish on the old weights), /start_weight_update, /update_weights with
// the tensors' names, dtypes and shapes while each is broadcast in that order (the call
// returns once every tensor has landed), /finish_weight_update with v,
// /reset_prefix_cache (no cached prefix outlives the weights that computed it), /resume.
// An engine that fails after the pause stays paused, its group aborted (the next push
// opens another), and the error names it and the call; Fleet.Sync then keeps it out.
type VLLMPush struct {
	Transport WeightTransport

	mu     sync.Mutex
	groups map[string]WeightGroup // by engine base URL
}

// NewVLLMPush returns a push over t.
func NewVLLMPush(t WeightTransport) *VLLMPush {
	return &VLLMPush{Transport: t, groups: map[string]WeightGroup{}}
}

// Push hands e the weights of version, tensors in the order given.
func (p *VLLMPush) Push(ctx context.Context, e *EnginePolicy, version int, tensors []PushTensor) error {
	g, err := p.group(ctx, e)
	if err != nil {
		return err
	}
	dropped := false
	fail := func(err error) error {
		if !dropped {
			p.drop(e, g)
		}
		return fmt.Errorf("rollout: weights of version %d to %s: %w (the engine stays paused)", version, e.base, err)
	}
	for _, path := range []string{"/pause?mode=wait", "/start_weight_update"} {
		if err := e.control(ctx, path, nil); err != nil {
			return fail(err)
		}
	}
	info := struct {
		Names  []string `json:"names"`
		DTypes []string `json:"dtype_names"`
		Shapes [][]int  `json:"shapes"`
		Packed bool     `json:"packed"`
	}{Names: []string{}, DTypes: []string{}, Shapes: [][]int{}}
	for _, t := range tensors {
		info.Names = append(info.Names, t.Name)
		info.DTypes = append(info.DTypes, t.DType)
		info.Shapes = append(info.Shapes, t.Shape)
	}
	// /update_weights returns once the broadcasts have landed, so the two run side by
	// side; whichever fails first stops the other (an aborted group ends a broadcast that
	// no rank receives, which NCCL would otherwise wait on for ever).
	upCtx, cancelUp := context.WithCancel(ctx)
	defer cancelUp()
	landed := make(chan error, 1)
	go func() { landed <- e.control(upCtx, "/update_weights", map[string]any{"update_info": info}) }()
	bcCtx, cancelBc := context.WithCancel(ctx)
	defer cancelBc()
	sent := make(chan error, 1)
	go func() {
		for _, t := range tensors {
			if err := g.Broadcast(bcCtx, t); err != nil {
				sent <- fmt.Errorf("broadcasting %s: %w", t.Name, err)
				return
			}
		}
		sent <- nil
	}()
	select {
	case err := <-landed:
		if err != nil {
			cancelBc()
			p.drop(e, g)
			dropped = true
			<-sent
			return fail(err)
		}
		if err := <-sent; err != nil {
			return fail(err)
		}
	case err := <-sent:
		if err != nil {
			cancelUp()
			<-landed
			return fail(err)
		}
		if err := <-landed; err != nil {
			return fail(err)
		}
	}
	if err := e.control(ctx, "/finish_weight_update", map[string]string{"weight_version": fmt.Sprint(version)}); err != nil {
		return fail(err)
	}
	for _, path := range []string{"/reset_prefix_cache", "/resume"} {
		if err := e.control(ctx, path, nil); err != nil {
			return fail(err)
		}
	}
	return nil
}

// Close aborts every group.
func (p *VLLMPush) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for base, g := range p.groups {
		g.Abort()
		delete(p.groups, base)
	}
}

func (p *VLLMPush) drop(e *EnginePolicy, g WeightGroup) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.groups[e.base] == g {
		delete(p.groups, e.base)
	}
	g.Abort()
}

// group is e's open group, opened on first use.
func (p *VLLMPush) group(ctx context.Context, e *EnginePolicy) (WeightGroup, error) {
	p.mu.Lock()
	g := p.groups[e.base]
	p.mu.Unlock()
	if g != nil {
		return g, nil
	}
	fail := func(err error) error {
		return fmt.Errorf("rollout: opening the weight-transfer group of %s: %w", e.base, err)
	}
	var size struct {
		WorldSize *int `json:"world_size"`
	}
	if err := e.get(ctx, "/get_world_size?include_dp=true", &size); err != nil {
		return nil, fail(err)
	}
	if size.WorldSize == nil || *size.WorldSize < 1 {
		return nil, fail(errors.New("/get_world_size answered no world_size"))
	}
	workers := *size.WorldSize
	id, err := p.Transport.UniqueID()
	if err != nil {
		return nil, fail(err)
	}
	init := map[string]any{"init_info": map[string]any{
		"nccl_unique_id_b64": base64.StdEncoding.EncodeToString(id), "rank_offset": 1, "world_size": 1 + workers, "packed": false}}
	// Both sides enter the group's init together, and neither returns before the other
	// has: whichever fails first stops the other (NCCL's init would wait for ever on an
	// engine that refused).
	joinCtx, cancelJoin := context.WithCancel(ctx)
	defer cancelJoin()
	joined := make(chan error, 1)
	go func() { joined <- e.control(joinCtx, "/init_weight_transfer_engine", init) }()
	openCtx, cancelOpen := context.WithCancel(ctx)
	defer cancelOpen()
	type openResult struct {
		g   WeightGroup
		err error
	}
	opened := make(chan openResult, 1)
	go func() {
		g, err := p.Transport.Open(openCtx, id, 1+workers)
		if err == nil {
			if err = g.Warm(openCtx); err != nil {
				g.Abort()
				g = nil
			}
		}
		opened <- openResult{g, err}
	}()
	var r openResult
	select {
	case err := <-joined:
		if err != nil {
			cancelOpen()
			if r = <-opened; r.g != nil {
				r.g.Abort()
			}
			return nil, fail(err)
		}
		if r = <-opened; r.err != nil {
			return nil, fail(r.err)
		}
	case r = <-opened:
		if r.err != nil {
			cancelJoin()
			<-joined
			return nil, fail(r.err)
		}
		if err := <-joined; err != nil {
			r.g.Abort()
			return nil, fail(err)
		}
	}
	g = r.g
	p.mu.Lock()
	p.groups[e.base] = g
	p.mu.Unlock()
	return g, nil
}

// control POSTs body (JSON; nil: none) to one of the engine's control routes, once: a
// control call is never retried (a second /update_weights would wait for broadcasts that
// never come). An answer other than 200 is an error quoting it.
func (e *EnginePolicy) control(ctx context.Context, path string, body any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	_, _, err := e.send(ctx, http.MethodPost, e.base+path, strings.SplitN(path, "?", 2)[0], b, 1<<20)
	return err
}

// get GETs one of the engine's routes and decodes its JSON answer into out.
func (e *EnginePolicy) get(ctx context.Context, path string, out any) error {
	route := strings.SplitN(path, "?", 2)[0]
	_, data, err := e.send(ctx, http.MethodGet, e.base+path, route, nil, 1<<20)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("GET %s: the answer is not the expected JSON: %v: %s", route, err, clipText(string(data), 200))
	}
	return nil
}
