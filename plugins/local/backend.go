package local

import (
	"context"
	"fmt"
	"sync"

	"github.com/rlhost/rlhost/sdk/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Backend is the local trace backend (trace.Backend).
type Backend struct {
	mu    sync.Mutex
	store *Store
}

// Info implements trace.Backend.
func (b *Backend) Info(context.Context) (trace.Info, error) {
	return trace.Info{Name: "local", Version: Version, Features: []string{"sqlite", "wal"}}, nil
}

// Init opens RUN_DIR/traces/traces.db, or the file named by the config key "path".
func (b *Backend) Init(ctx context.Context, run trace.Run) (string, error) {
	var cfg struct {
		Path string `config:"path"`
	}
	if err := trace.DecodeConfig("local", run.Config, &cfg); err != nil {
		return "", err
	}
	path := cfg.Path
	if path == "" && run.RunDir != "" {
		path = DBPath(run.RunDir)
	} else if path == "" {
		return "", fmt.Errorf("local: no run directory and no config path: %w", trace.ErrInvalidArgument)
	}
	st, err := Open(path, true)
	if err != nil {
		return "", err
	}
	if err := st.AddRun(ctx, run); err != nil {
		st.Close()
		return "", err
	}
	b.mu.Lock()
	if b.store != nil {
		b.store.Close()
	}
	b.store = st
	b.mu.Unlock()
	return "file://" + path, nil
}

func (b *Backend) current() (*Store, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.store == nil {
		return nil, status.Error(codes.FailedPrecondition, "local: Export before Init")
	}
	return b.store, nil
}

// Export implements trace.Backend.
func (b *Backend) Export(ctx context.Context, spans []trace.Span) error {
	st, err := b.current()
	if err != nil {
		return err
	}
	return st.Insert(ctx, spans)
}

// Flush checkpoints the WAL.
func (b *Backend) Flush(ctx context.Context) error {
	st, err := b.current()
	if err != nil {
		return err
	}
	return st.Checkpoint(ctx)
}

// Shutdown closes the store.
func (b *Backend) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.store == nil {
		return nil
	}
	err := b.store.Checkpoint(ctx)
	if cerr := b.store.Close(); err == nil {
		err = cerr
	}
	b.store = nil
	return err
}

var _ trace.Backend = (*Backend)(nil)
