package tracing

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/sdk/trace"
)

// Config is what the rollout loop tells the tracer. The zero value traces everything to the
// local backend.
type Config struct {
	// Backends are the trace plugins to ship to: "local", "mlflow", "weave" (several at once
	// are fine). Empty means ["local"]; ["none"] turns tracing off.
	Backends []string
	// Token2Text puts decoded prompt and response text on generate spans and on the root span
	// (needs Decode).
	Token2Text bool
	// MaxSamplesPerStep: 0 traces every sample; N picks N distinct sample indexes per step
	// (seeded by Seed and the step) and traces all rollouts of each.
	MaxSamplesPerStep int
	Seed              int64

	Project, Experiment, RunID, RunName, RunDir string
	// BackendConfig is each backend's own section (e.g. mlflow tracking_uri), by backend name.
	BackendConfig map[string]map[string]any
	// RunConfigJSON is the whole run config, secrets redacted (New redacts it again: values of
	// secret-looking keys and of secret environment variables become "***").
	RunConfigJSON string
	// Decode turns token ids into text (for Token2Text).
	Decode func(ids []int) string
	// QueueSpans bounds the spans held in memory per backend (default 50000); beyond it spans
	// are dropped and counted.
	QueueSpans int
	// Logger receives warnings (backend failures, drops). Default: none.
	Logger hclog.Logger
	// Relay opens no backend: the tracer makes trajectories as one that does (the same
	// sampling, the same spans) and keeps their spans for TakeRelayed, for another tracer to
	// ship (Relayed): a rank other than 0 of a job, whose spans rank 0 ships.
	Relay bool
}

// DefaultQueueSpans is the default Config.QueueSpans.
const DefaultQueueSpans = 50000

// Tracer makes trajectories and ships their spans. A nil *Tracer traces nothing.
type Tracer struct {
	cfg       Config
	exporters []*exporter
	log       hclog.Logger

	secrets []string // values scrubbed from every span

	mu       sync.Mutex
	step     int
	validate bool
	chosen   map[int64]bool // nil: every sample
	closed   bool
	relay    bool         // Config.Relay
	relayed  []trace.Span // Config.Relay: the spans TakeRelayed has not taken
	dropped  int64        // Config.Relay: spans beyond QueueSpans, dropped
}

// ErrConfig is returned by New for a configuration that cannot work.
var ErrConfig = errors.New("tracing: bad config")

// Backends returns the normalised backend list of cfg: de-duplicated, "local" when empty, nil
// when tracing is off ("none").
func (cfg Config) backends() ([]string, error) {
	var out []string
	for _, b := range cfg.Backends {
		for _, name := range strings.Split(b, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "" || slices.Contains(out, name) {
				continue
			}
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return []string{"local"}, nil
	}
	if slices.Contains(out, "none") {
		if len(out) > 1 {
			return nil, fmt.Errorf("%w: backend \"none\" turns tracing off and cannot be combined with %v", ErrConfig, out)
		}
		return nil, nil
	}
	return out, nil
}

// Token2TextDefault is token2text when the config leaves it unset (null): on when the backends
// include local (the default), so the local store and its viewer hold readable text; off when
// only remote backends (mlflow, weave) are named, whose storage or ingestion is paid per byte:
// text spans carry the decoded prompt and response a second time on the root span, which
// costs more bytes per trajectory than the token ids (docs/tracing.md has the figures).
func Token2TextDefault(backends []string) bool {
	names, err := Config{Backends: backends}.backends()
	return err == nil && slices.Contains(names, "local")
}

// New opens every backend of cfg with open (usually OpenPlugin) and initialises it with the run.
// A backend that is temporarily unavailable does not fail New: its spans are spooled until it
// answers. A backend that rejects the run (a bad config) or cannot be found does.
func New(ctx context.Context, cfg Config, open func(ctx context.Context, name string) (trace.Backend, error)) (*Tracer, error) {
	names, err := cfg.backends()
	if err != nil {
		return nil, err
	}
	if cfg.Token2Text && cfg.Decode == nil && len(names) > 0 {
		return nil, fmt.Errorf("%w: token2text needs a Decode function", ErrConfig)
	}
	if cfg.MaxSamplesPerStep < 0 {
		return nil, fmt.Errorf("%w: max_samples_per_step is %d; want 0 (all) or more", ErrConfig, cfg.MaxSamplesPerStep)
	}
	if cfg.QueueSpans <= 0 {
		cfg.QueueSpans = DefaultQueueSpans
	}
	t := &Tracer{cfg: cfg, log: cfg.Logger, secrets: secrets()}
	if t.log == nil {
		t.log = hclog.NewNullLogger()
	}
	if len(names) == 0 {
		return t, nil
	}
	if cfg.Relay {
		t.relay = true
		return t, nil
	}
	spoolRoot := ""
	if cfg.RunDir != "" {
		spoolRoot = filepath.Join(cfg.RunDir, "traces", "spool")
	} else if spoolRoot, err = os.MkdirTemp("", "rlhost-trace-spool-"); err != nil {
		return nil, fmt.Errorf("tracing: spool directory: %w", err)
	}
	run := trace.Run{Project: cfg.Project, Experiment: cfg.Experiment, RunID: cfg.RunID, RunName: cfg.RunName,
		RunDir: cfg.RunDir, RunConfig: redactJSON(cfg.RunConfigJSON, t.secrets)}
	for _, name := range names {
		b, err := open(ctx, name)
		if err != nil {
			t.shutdown(ctx)
			return nil, fmt.Errorf("tracing: backend %q: %w", name, err)
		}
		r := run
		r.Config = cfg.BackendConfig[name]
		if r.Config == nil {
			r.Config = map[string]any{}
		}
		e := newExporter(name, b, r, filepath.Join(spoolRoot, name), cfg.QueueSpans, t.log)
		t.exporters = append(t.exporters, e)
		if err := e.init(ctx); err != nil && !temporary(err) {
			t.shutdown(ctx)
			return nil, fmt.Errorf("tracing: backend %q: Init: %w", name, err)
		} else if err != nil {
			t.log.Warn("trace backend unavailable at start; spans are spooled until it answers", "backend", name, "error", err)
		}
	}
	for _, e := range t.exporters {
		go e.run()
	}
	return t, nil
}

// Enabled reports whether anything is traced.
func (t *Tracer) Enabled() bool { return t != nil && (len(t.exporters) > 0 || t.relay) }

// TakeRelayed returns the spans a Config.Relay tracer has kept since the last call, and how
// many it dropped beyond Config.QueueSpans.
func (t *Tracer) TakeRelayed() (spans []trace.Span, dropped int64) {
	if t == nil {
		return nil, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	spans, dropped = t.relayed, t.dropped
	t.relayed, t.dropped = nil, 0
	return spans, dropped
}

// Relayed ships spans another tracer kept (Config.Relay) as this one's own.
func (t *Tracer) Relayed(spans []trace.Span) {
	if !t.Enabled() {
		return
	}
	for _, s := range spans {
		t.emit(s)
	}
}

// BeginStep starts a step: sampleIndexes are the sample indexes of the step's batch (repeats,
// one per rollout, are fine). With MaxSamplesPerStep = N it picks N distinct ones, seeded by
// Config.Seed, the step and validate.
func (t *Tracer) BeginStep(step int, validate bool, sampleIndexes []int64) {
	if !t.Enabled() {
		return
	}
	chosen := Choose(t.cfg.Seed, step, validate, sampleIndexes, t.cfg.MaxSamplesPerStep)
	t.mu.Lock()
	t.step, t.validate, t.chosen = step, validate, chosen
	t.mu.Unlock()
}

// Choose returns the set of sample indexes traced at a step: nil (all) when max is 0 or not
// smaller than the number of distinct indexes, else max of them drawn without replacement by a
// PCG generator seeded with (seed, step, validate). The result depends only on its arguments'
// values (not on their order).
func Choose(seed int64, step int, validate bool, sampleIndexes []int64, max int) map[int64]bool {
	if max <= 0 {
		return nil
	}
	uniq := slices.Clone(sampleIndexes)
	sort.Slice(uniq, func(i, j int) bool { return uniq[i] < uniq[j] })
	uniq = slices.Compact(uniq)
	if len(uniq) <= max {
		return nil
	}
	stream := uint64(step) << 1
	if validate {
		stream |= 1
	}
	r := rand.New(rand.NewPCG(uint64(seed), stream))
	chosen := make(map[int64]bool, max)
	for i := 0; i < max; i++ { // partial Fisher-Yates
		j := i + r.IntN(len(uniq)-i)
		uniq[i], uniq[j] = uniq[j], uniq[i]
		chosen[uniq[i]] = true
	}
	return chosen
}

// StepMetrics returns the tracing counters, summed over backends and per backend:
// tracing/exported (spans stored by a backend, cumulative), tracing/dropped (spans lost:
// queue full, rejected by a backend, or still spooled when the run closed; cumulative),
// tracing/spooled (spans waiting in the spool now) and tracing/queued (spans waiting in memory
// now). Per backend the keys are tracing/<backend>/exported and so on.
func (t *Tracer) StepMetrics() map[string]float64 {
	m := map[string]float64{}
	if !t.Enabled() {
		return m
	}
	for _, e := range t.exporters {
		c := e.counts()
		for k, v := range map[string]int64{"exported": c.exported, "spooled": c.spooled, "dropped": c.dropped, "queued": c.queued} {
			m["tracing/"+k] += float64(v)
			if len(t.exporters) > 1 {
				m["tracing/"+e.name+"/"+k] = float64(v)
			}
		}
	}
	return m
}

// Close ships what is queued and spooled (as far as ctx allows), flushes and shuts the
// backends down. Spans still spooled stay on disk and are retried by the next Tracer of the
// same run directory.
func (t *Tracer) Close(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, e := range t.exporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.close(ctx); err != nil {
				emu.Lock()
				errs = append(errs, fmt.Errorf("tracing: backend %q: %w", e.name, err))
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (t *Tracer) shutdown(ctx context.Context) {
	for _, e := range t.exporters {
		e.stopBackend(ctx)
	}
}

func (t *Tracer) emit(s trace.Span) {
	scrubSpan(&s, t.secrets)
	if t.relay {
		t.mu.Lock()
		if len(t.relayed) < t.cfg.QueueSpans {
			t.relayed = append(t.relayed, s)
		} else {
			t.dropped++
		}
		t.mu.Unlock()
		return
	}
	for _, e := range t.exporters {
		e.enqueue(s)
	}
}

// OpenPlugin returns an open function for New that starts the trace plugin rlhost-trace-NAME
// found by host/plugin's discovery, supervised (restarted with backoff after a crash).
func OpenPlugin(opts plugin.Options) func(ctx context.Context, name string) (trace.Backend, error) {
	return func(ctx context.Context, name string) (trace.Backend, error) {
		return plugin.OpenTrace(ctx, name, opts)
	}
}
