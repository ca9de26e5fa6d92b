package plugin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/sdk/trace"
)

// Task is a supervised task plugin. It implements the sdk task interfaces (Task, Configurer,
// Prompter, Environment), so the host calls it as it would call an in-process task.
type Task struct {
	sup      *Supervisor
	config   map[string]any
	info     atomic.Pointer[task.Info] // as read at the last start
	timeouts Timeouts
	trajOf   sync.Map // instance id -> trajectory id, from Start to End, for errors
}

// Timeouts bound the calls a run makes to a task plugin (task.timeouts.* in the run config):
// a call that gets no answer within its limit is cancelled and fails with an error naming the
// plugin, the call, its trajectory and the time taken (Supervisor.CallWithin). Configure
// bounds the Info and Configure calls of each (re)start; Preprocess bounds the wait for each
// record's answer. Zero takes the default (DefaultTimeouts); a negative limit means none.
type Timeouts struct {
	Configure, Prompt, Start, Obs, End, Score, Preprocess time.Duration
}

// DefaultTimeouts are the limits a zero Timeouts field takes: generous enough for
// environments that run tests in sandboxes (swedev's End) or wait for an external episode
// (genchat's End), short enough that a hung plugin costs minutes, not a night.
func DefaultTimeouts() Timeouts {
	return Timeouts{Configure: 2 * time.Minute, Prompt: time.Minute, Start: 5 * time.Minute, Obs: 10 * time.Minute,
		End: 15 * time.Minute, Score: 5 * time.Minute, Preprocess: time.Minute}
}

// Limit returns the limit of a call (0: none) and the config key that sets it.
func (t Timeouts) Limit(call string) (time.Duration, string) {
	def := DefaultTimeouts()
	var d, dd time.Duration
	switch call {
	case "Info", "Configure":
		d, dd, call = t.Configure, def.Configure, "Configure"
	case "Prompt":
		d, dd = t.Prompt, def.Prompt
	case "Start":
		d, dd = t.Start, def.Start
	case "Obs":
		d, dd = t.Obs, def.Obs
	case "End":
		d, dd = t.End, def.End
	case "Score":
		d, dd = t.Score, def.Score
	case "Preprocess":
		d, dd = t.Preprocess, def.Preprocess
	default:
		return 0, ""
	}
	if d == 0 {
		d = dd
	}
	return max(d, 0), "task.timeouts." + strings.ToLower(call)
}

// TaskOptions are what OpenTaskBinaryWith takes beside the launch options.
type TaskOptions struct {
	// Host is the Host service of the run: a plugin that declares the feature host_service
	// gets it in Configure (also without a task config); other plugins never see it.
	Host *task.HostService
	// Timeouts bound the plugin's calls.
	Timeouts Timeouts
}

// OpenTask finds the task plugin called name (or at a path), starts it, reads its Info and
// applies config. After a crash the plugin is restarted and configured again on the next call.
func OpenTask(ctx context.Context, name string, config map[string]any, opts Options) (*Task, error) {
	bin, err := Find(sdkplugin.KindTask, name)
	if err != nil {
		return nil, err
	}
	return OpenTaskBinary(ctx, bin, config, opts)
}

// OpenTaskBinary is OpenTask for a known binary.
func OpenTaskBinary(ctx context.Context, bin Binary, config map[string]any, opts Options) (*Task, error) {
	return OpenTaskBinaryWithHost(ctx, bin, config, nil, opts)
}

// OpenTaskBinaryWithHost is OpenTaskBinary for a run that serves the Host service at hs: a
// plugin that declares the feature host_service gets hs in Configure (also without a task
// config); other plugins never see it.
func OpenTaskBinaryWithHost(ctx context.Context, bin Binary, config map[string]any, hs *task.HostService, opts Options) (*Task, error) {
	return OpenTaskBinaryWith(ctx, bin, config, opts, TaskOptions{Host: hs})
}

// OpenTaskBinaryWith is OpenTaskBinary with the Host service and the calls' timeouts.
func OpenTaskBinaryWith(ctx context.Context, bin Binary, config map[string]any, opts Options, topts TaskOptions) (*Task, error) {
	t := &Task{sup: NewSupervisor(bin, opts), config: config, timeouts: topts.Timeouts}
	hs := topts.Host
	t.sup.OnStart = func(ctx context.Context, p *Process) error {
		limit, key := t.timeouts.Limit("Configure")
		if limit > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, limit)
			defer cancel()
		}
		// late names a call of the start that ran out of time.
		late := func(call string, err error) error {
			if limit > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s: %w: no answer within %s (%s)", call, ErrTimeout, limit, key)
			}
			return fmt.Errorf("%s: %w", call, err)
		}
		c := task.NewClient(p.Conn())
		info, err := c.Info(ctx)
		if err != nil {
			return late("Info", err)
		}
		if len(t.config) > 0 && !info.Has(task.FeatureConfigure) {
			return noConfig(bin.Name, t.config)
		}
		if hs != nil && info.Has(task.FeatureHostService) {
			if err := c.ConfigureWithHost(ctx, t.config, hs); err != nil {
				return late("Configure", err)
			}
		} else if info.Has(task.FeatureConfigure) {
			if err := c.Configure(ctx, t.config); err != nil {
				return late("Configure", err)
			}
		}
		t.info.Store(&info)
		return nil
	}
	if _, err := t.sup.Process(ctx); err != nil {
		t.sup.Close()
		return nil, err
	}
	return t, nil
}

// Supervisor returns the process supervisor (restarts, health).
func (t *Task) Supervisor() *Supervisor { return t.sup }

// Close stops the plugin.
func (t *Task) Close() { t.sup.Close() }

// Name is the task's name as its binary says it.
func (t *Task) Name() string { return t.sup.bin.Name }

// CachedInfo returns the Info read at the last start.
func (t *Task) CachedInfo() task.Info {
	if i := t.info.Load(); i != nil {
		return *i
	}
	return task.Info{}
}

// ErrUndeclaredFeature is a call the plugin did not declare in Info.Features: the host makes
// no such call (docs/protocol.md), and says which feature is missing instead.
var ErrUndeclaredFeature = errors.New("plugin: feature not declared")

// need fails a call behind a feature the plugin did not declare.
func (t *Task) need(feature, call string) error {
	if t.CachedInfo().Has(feature) {
		return nil
	}
	return fmt.Errorf("%w: task %s does not declare the %q feature in Info, so the host does not call %s",
		ErrUndeclaredFeature, t.Name(), feature, call)
}

func noConfig(name string, config map[string]any) error {
	return fmt.Errorf("%w: task %s takes no configuration (it does not declare the %q feature), but the run sets task keys %v: remove them",
		ErrUndeclaredFeature, name, task.FeatureConfigure, sortedKeys(config))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// callTask makes one call within its timeout; what says what it is for, for errors and
// Pending ("trajectory s1-0-1").
func callTask[T any](ctx context.Context, t *Task, call, what string, f func(ctx context.Context, c *task.Client) (T, error)) (T, error) {
	var out T
	limit, key := t.timeouts.Limit(call)
	err := t.sup.CallWithin(ctx, call, what, limit, key, func(ctx context.Context, p *Process) error {
		var err error
		out, err = f(ctx, task.NewClient(p.Conn()))
		return err
	})
	return out, err
}

// trajectory says which trajectory an instance belongs to, for errors.
func (t *Task) trajectory(instance string) string {
	if id, ok := t.trajOf.Load(instance); ok {
		return "trajectory " + id.(string)
	}
	return "instance " + instance
}

// Pending lists the plugin's calls in flight, oldest first.
func (t *Task) Pending() []Pending { return t.sup.Pending() }

// Info calls Info.
func (t *Task) Info(ctx context.Context) (task.Info, error) {
	return callTask(ctx, t, "Info", "", func(ctx context.Context, c *task.Client) (task.Info, error) { return c.Info(ctx) })
}

// Configure applies config now and after every restart.
func (t *Task) Configure(ctx context.Context, config map[string]any) error {
	if !t.CachedInfo().Has(task.FeatureConfigure) {
		if len(config) > 0 {
			return noConfig(t.Name(), config)
		}
		t.config = config // nothing to send
		return nil
	}
	t.config = config
	_, err := callTask(ctx, t, "Configure", "", func(ctx context.Context, c *task.Client) (struct{}, error) {
		return struct{}{}, c.Configure(ctx, config)
	})
	return err
}

// Preprocess sends one record.
func (t *Task) Preprocess(ctx context.Context, rec task.Record) (task.Row, error) {
	if err := t.need(task.FeaturePreprocess, "Preprocess"); err != nil {
		return task.Row{}, err
	}
	return callTask(ctx, t, "Preprocess", fmt.Sprintf("record %d", rec.Index), func(ctx context.Context, c *task.Client) (task.Row, error) {
		return c.Preprocess(ctx, rec)
	})
}

// PreprocessStream streams records (see task.Client.PreprocessStream). The stream as a whole
// has no deadline; each record must be answered within the Preprocess timeout of its sending
// (or of the previous answer, when the plugin works through a backlog).
func (t *Task) PreprocessStream(ctx context.Context, produce func(yield func(task.Record) error) error,
	consume func(index int64, row task.Row, skipReason string) error) error {
	if err := t.need(task.FeaturePreprocess, "Preprocess"); err != nil {
		return err
	}
	limit, key := t.timeouts.Limit("Preprocess")
	return t.sup.CallWithin(ctx, "Preprocess", "", 0, key, func(ctx context.Context, p *Process) error {
		w := newStreamWatch(limit)
		ctx, stop := w.watch(ctx)
		defer stop()
		err := task.NewClient(p.Conn()).PreprocessStream(ctx, func(yield func(task.Record) error) error {
			return produce(func(r task.Record) error {
				w.sent(r.Index)
				return yield(r)
			})
		}, func(index int64, row task.Row, reason string) error {
			w.answered()
			return consume(index, row, reason)
		})
		if late := w.lateRecord(); late != nil {
			return fmt.Errorf("%w: record %d got no answer within %s (%s)", ErrTimeout, *late, limit, key)
		}
		return err
	})
}

// Prompt calls Prompt. A plugin that does not declare "prompt" is not called: the prompt is
// the row's own messages and the tools of Info, as the SDKs' default Prompt answers.
func (t *Task) Prompt(ctx context.Context, row task.Row) (task.Prompt, error) {
	if info := t.CachedInfo(); !info.Has(task.FeaturePrompt) {
		return task.Prompt{Messages: row.Prompt, Tools: info.Tools}, nil
	}
	return callTask(ctx, t, "Prompt", "data_source "+row.DataSource, func(ctx context.Context, c *task.Client) (task.Prompt, error) {
		return c.Prompt(ctx, row)
	})
}

// Start calls Start.
func (t *Task) Start(ctx context.Context, req task.StartRequest) (task.StartResult, error) {
	if err := t.need(task.FeatureEnvironment, "Start"); err != nil {
		return task.StartResult{}, err
	}
	what := ""
	if req.TrajectoryID != "" {
		what = "trajectory " + req.TrajectoryID
	}
	res, err := callTask(ctx, t, "Start", what, func(ctx context.Context, c *task.Client) (task.StartResult, error) {
		return c.Start(ctx, req)
	})
	if err == nil && req.TrajectoryID != "" {
		t.trajOf.Store(res.InstanceID, req.TrajectoryID)
	}
	return res, err
}

// Obs calls Obs.
func (t *Task) Obs(ctx context.Context, req task.ObsRequest) (task.ObsResult, error) {
	if err := t.need(task.FeatureEnvironment, "Obs"); err != nil {
		return task.ObsResult{}, err
	}
	return callTask(ctx, t, "Obs", t.trajectory(req.InstanceID), func(ctx context.Context, c *task.Client) (task.ObsResult, error) {
		return c.Obs(ctx, req)
	})
}

// End calls End.
func (t *Task) End(ctx context.Context, req task.EndRequest) (task.EndResult, error) {
	if err := t.need(task.FeatureEnvironment, "End"); err != nil {
		return task.EndResult{}, err
	}
	what := t.trajectory(req.InstanceID)
	t.trajOf.Delete(req.InstanceID)
	return callTask(ctx, t, "End", what, func(ctx context.Context, c *task.Client) (task.EndResult, error) {
		return c.End(ctx, req)
	})
}

// Score calls Score.
func (t *Task) Score(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	what := "1 item"
	if len(items) != 1 {
		what = fmt.Sprintf("%d items", len(items))
	}
	return callTask(ctx, t, "Score", what, func(ctx context.Context, c *task.Client) ([]task.ScoreResult, error) {
		return c.Score(ctx, items)
	})
}

// Trace is a supervised trace-backend plugin; it implements trace.Backend.
type Trace struct {
	sup *Supervisor
}

// OpenTrace finds and starts the trace backend called name.
func OpenTrace(ctx context.Context, name string, opts Options) (*Trace, error) {
	bin, err := Find(sdkplugin.KindTrace, name)
	if err != nil {
		return nil, err
	}
	t := &Trace{sup: NewSupervisor(bin, opts)}
	if _, err := t.sup.Process(ctx); err != nil {
		t.sup.Close()
		return nil, err
	}
	return t, nil
}

// Close stops the plugin.
func (t *Trace) Close() { t.sup.Close() }

func callTrace[T any](ctx context.Context, t *Trace, call string, f func(*trace.Client) (T, error)) (T, error) {
	var out T
	err := t.sup.Call(ctx, call, func(p *Process) error {
		var err error
		out, err = f(trace.NewClient(p.Conn()))
		return err
	})
	return out, err
}

// Info calls Info.
func (t *Trace) Info(ctx context.Context) (trace.Info, error) {
	return callTrace(ctx, t, "Info", func(c *trace.Client) (trace.Info, error) { return c.Info(ctx) })
}

// Init calls Init.
func (t *Trace) Init(ctx context.Context, run trace.Run) (string, error) {
	return callTrace(ctx, t, "Init", func(c *trace.Client) (string, error) { return c.Init(ctx, run) })
}

// Export calls Export.
func (t *Trace) Export(ctx context.Context, spans []trace.Span) error {
	_, err := callTrace(ctx, t, "Export", func(c *trace.Client) (struct{}, error) { return struct{}{}, c.Export(ctx, spans) })
	return err
}

// Flush calls Flush.
func (t *Trace) Flush(ctx context.Context) error {
	_, err := callTrace(ctx, t, "Flush", func(c *trace.Client) (struct{}, error) { return struct{}{}, c.Flush(ctx) })
	return err
}

// Shutdown calls Shutdown.
func (t *Trace) Shutdown(ctx context.Context) error {
	_, err := callTrace(ctx, t, "Shutdown", func(c *trace.Client) (struct{}, error) { return struct{}{}, c.Shutdown(ctx) })
	return err
}

var (
	_ task.Task        = (*Task)(nil)
	_ task.Configurer  = (*Task)(nil)
	_ task.Prompter    = (*Task)(nil)
	_ task.Environment = (*Task)(nil)
	_ trace.Backend    = (*Trace)(nil)
)
