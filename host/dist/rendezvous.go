package dist

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// Share hands rank 0's value of key to every rank: rank 0 calls make (e.g. ncclGetUniqueId)
// and stores the value, every other rank waits for it, and each rank then says it has it;
// rank 0 returns once every rank has, so a rank missing from the job is named (ctx bounds
// the wait) instead of being waited for in the first collective. The store is torchrun's
// agent's, or (Slurm, torchrun without the agent store) one rank 0 serves at MASTER_PORT.
// A single process just calls make.
func Share(ctx context.Context, w World, key string, make func() ([]byte, error)) ([]byte, error) {
	if w.Single() {
		return make()
	}
	if w.Store == "" {
		return nil, fmt.Errorf("dist: %s has no rendezvous store (MASTER_ADDR and MASTER_PORT)", w)
	}
	key = "rlhost/" + key
	addr := w.Store
	if w.Rank == 0 && !w.AgentStore {
		_, port, _ := net.SplitHostPort(w.Store)
		srv, err := Serve(":" + port)
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	st, err := Dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, w)
	}
	defer st.Close()
	var v []byte
	if w.Rank == 0 {
		if v, err = make(); err != nil {
			return nil, err
		}
		if err := st.Set(ctx, key, v); err != nil {
			return nil, fmt.Errorf("dist: storing %s: %w", key, err)
		}
	} else if v, err = st.Get(ctx, key); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, w)
	}
	if err := st.Set(ctx, fmt.Sprintf("%s/has/%d", key, w.Rank), []byte{1}); err != nil {
		return nil, err
	}
	if w.Rank != 0 {
		return v, nil
	}
	var missing []string
	for r := 1; r < w.WorldSize; r++ {
		if _, err := st.Get(ctx, fmt.Sprintf("%s/has/%d", key, r)); err != nil {
			if ctx.Err() == nil {
				return nil, err
			}
			missing = append(missing, fmt.Sprint(r))
			for r++; r < w.WorldSize; r++ { // the others without waiting
				if ok, _ := st.check(context.Background(), fmt.Sprintf("%s/has/%d", key, r)); !ok {
					missing = append(missing, fmt.Sprint(r))
				}
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("dist: ranks %s of %d never reached the rendezvous at %s: %w", strings.Join(missing, ", "), w.WorldSize, w.Store, ctx.Err())
	}
	return v, nil
}
