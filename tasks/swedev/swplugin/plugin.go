// Package swplugin is the swedev task as an rlhost plugin: software-engineering episodes in
// sandbox instances (package sandbox, in process or a remote rlhost-sandbox). Start creates an
// instance from the row's repository snapshot; the model works with the tools bash,
// str_replace_editor and submit; End runs the hidden tests (the row's test_patch, then
// FAIL_TO_PASS and PASS_TO_PASS) and rewards 1 when every FAIL_TO_PASS test passes and every
// PASS_TO_PASS test still passes, else 0, then deletes the instance. Rows carry SWE-bench's
// fields. Command rlhost-task-swedev serves it. See docs/swedev.md.
package swplugin

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/swedev/sandbox"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Names of the task.
const (
	Name              = "swedev"
	DefaultDataSource = "swedev"
	Ability           = "software-engineering"
)

// Config is the task section of the run config.
type Config struct {
	SandboxURL   string        `config:"sandbox_url"`                                // a remote rlhost-sandbox; empty runs the sandbox in the plugin's process
	SandboxToken string        `config:"sandbox_token" secret:"true"`                // its bearer token
	Isolation    string        `config:"isolation"`                                  // isolation of the in-process sandbox ("" = strongest available)
	MaxInstances int           `config:"max_instances" want:"a positive integer"`    // instances of the in-process sandbox
	Slots        int           `config:"slots" want:"a positive integer"`            // commands running at once in the in-process sandbox (0 = 2 x CPUs)
	Lease        time.Duration `config:"lease_s"`                                    // lease of an instance
	CommandWall  time.Duration `config:"command_timeout_s"`                          // wall-clock limit of one bash call
	TestWall     time.Duration `config:"test_timeout_s"`                             // wall-clock limit of the hidden tests
	MaxOutput    int           `config:"max_output_chars" want:"a positive integer"` // characters of a tool's output the model sees
	ROBinds      []string      `config:"ro_binds" want:"a list of absolute paths"`   // extra host paths the in-process sandbox's instances see read-only
}

// DefaultConfig is the default task config.
func DefaultConfig() Config {
	return Config{MaxInstances: 256, Lease: 30 * time.Minute, CommandWall: 30 * time.Second,
		TestWall: 5 * time.Minute, MaxOutput: 8000}
}

// Task is the swedev task.
type Task struct {
	*task.ToolEnv
	mu       sync.Mutex
	cfg      Config
	backend  sandbox.Backend
	local    *sandbox.Manager
	episodes map[string]*episode
}

type episode struct {
	started   time.Time
	sandboxID string
	spec      Spec
	submitted bool
	mu        sync.Mutex
}

// New returns the task with its default config.
func New() *Task {
	t := &Task{cfg: DefaultConfig(), episodes: map[string]*episode{}}
	t.ToolEnv = &task.ToolEnv{Tools: []task.Tool{bashTool{t}, editorTool{t}, submitTool{t}}, Lease: t.cfg.Lease}
	return t
}

// Close deletes the in-process sandbox's instances.
func (t *Task) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.local != nil {
		t.local.Close()
		t.local, t.backend = nil, nil
	}
}

func (t *Task) config() Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cfg
}

// sandbox returns the backend, starting the in-process one on first use.
func (t *Task) sandbox() (sandbox.Backend, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.backend != nil {
		return t.backend, nil
	}
	if t.cfg.SandboxURL != "" {
		t.backend = &sandbox.Client{URL: t.cfg.SandboxURL, Token: t.cfg.SandboxToken}
		return t.backend, nil
	}
	m, err := sandbox.New(sandbox.Config{MaxInstances: t.cfg.MaxInstances, Slots: t.cfg.Slots, Isolation: t.cfg.Isolation,
		Lease: t.cfg.Lease, MaxLease: max(t.cfg.Lease, 2*time.Hour), ReadOnlyBinds: t.cfg.ROBinds})
	if err != nil {
		return nil, err
	}
	task.Logger().Info("swedev sandbox started in process", "isolation", m.Isolation(), "root", m.Root())
	if m.WeakIsolation() {
		task.Logger().Warn(weakWarning(m.Isolation()))
	}
	t.local, t.backend = m, m
	return m, nil
}

func weakWarning(iso string) string {
	return fmt.Sprintf("swedev sandbox isolation is %s (no file system view: bubblewrap missing and not root, or task.config.isolation asked for it): commands of the model see this machine's files, "+
		"the dataset's hidden tests and reference patches included; install bubblewrap (make setup-swedev) or run as root", iso)
}

// isolation is the sandbox's isolation mode ("" when it cannot start or answer).
func (t *Task) isolation(ctx context.Context) string {
	sb, err := t.sandbox()
	if err != nil {
		return ""
	}
	switch s := sb.(type) {
	case *sandbox.Manager:
		return s.Isolation()
	case *sandbox.Client:
		iso, _ := s.Isolation(ctx)
		return iso
	}
	return ""
}

func (t *Task) episode(id string) (*episode, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ep, ok := t.episodes[id]
	if !ok {
		return nil, task.NotFound("instance %q is not running", id)
	}
	return ep, nil
}

// Start creates the trajectory's sandbox instance from the row's snapshot.
func (t *Task) Start(ctx context.Context, req task.StartRequest) (task.StartResult, error) {
	spec, err := SpecOf(req.Row.RewardModel.GroundTruth, req.Row.ExtraInfo)
	if err != nil {
		return task.StartResult{}, task.InvalidArgument("swedev Start: %v", err)
	}
	sb, err := t.sandbox()
	if err != nil {
		return task.StartResult{}, err
	}
	cfg := t.config()
	info, err := sb.Create(ctx, sandbox.CreateRequest{Files: spec.Snapshot, BaseCommit: spec.BaseCommit, Lease: cfg.Lease})
	if err != nil {
		if errors.Is(err, sandbox.ErrBadInput) {
			return task.StartResult{}, task.InvalidArgument("swedev Start of %s: %v", spec.InstanceID, err)
		}
		return task.StartResult{}, fmt.Errorf("swedev Start of %s: %v", spec.InstanceID, err)
	}
	res, err := t.ToolEnv.Start(ctx, req)
	if err != nil {
		_ = sb.Delete(context.WithoutCancel(ctx), info.ID)
		return task.StartResult{}, err
	}
	t.mu.Lock()
	// Episodes the host never ended (their sandbox instances are gone with their lease).
	for id, ep := range t.episodes {
		if time.Since(ep.started) > cfg.Lease {
			delete(t.episodes, id)
		}
	}
	t.episodes[res.InstanceID] = &episode{started: time.Now(), sandboxID: info.ID, spec: spec}
	t.mu.Unlock()
	res.Lease = cfg.Lease
	return res, nil
}

// Obs runs the tool calls; a submit call ends the episode.
func (t *Task) Obs(ctx context.Context, req task.ObsRequest) (task.ObsResult, error) {
	ep, err := t.episode(req.InstanceID)
	if err != nil {
		return task.ObsResult{}, err
	}
	res, err := t.ToolEnv.Obs(ctx, req)
	if err != nil {
		return res, err
	}
	ep.mu.Lock()
	res.Done = res.Done || ep.submitted
	ep.mu.Unlock()
	return res, nil
}

// End takes the episode's diff, deletes its instance (and whatever still runs there), then
// runs the hidden tests on the diff in a fresh instance (EvaluatePatch) and rewards them. An
// aborted episode only deletes its instance.
func (t *Task) End(ctx context.Context, req task.EndRequest) (task.EndResult, error) {
	t.mu.Lock()
	ep, ok := t.episodes[req.InstanceID]
	delete(t.episodes, req.InstanceID)
	t.mu.Unlock()
	if !ok {
		return task.EndResult{}, task.NotFound("instance %q is not running", req.InstanceID)
	}
	_, _ = t.ToolEnv.End(ctx, req)
	sb, err := t.sandbox()
	if err != nil {
		return task.EndResult{}, err
	}
	if req.Aborted {
		_ = sb.Delete(context.WithoutCancel(ctx), ep.sandboxID)
		return task.EndResult{}, nil
	}
	diff, err := sb.Diff(ctx, ep.sandboxID)
	_ = sb.Delete(context.WithoutCancel(ctx), ep.sandboxID)
	if err != nil {
		return task.EndResult{}, fmt.Errorf("swedev End of %s: %v", ep.spec.InstanceID, err)
	}
	ev, err := EvaluatePatch(ctx, sb, diff, ep.spec, t.config().TestWall)
	if err != nil {
		return task.EndResult{}, fmt.Errorf("swedev End of %s: %v", ep.spec.InstanceID, err)
	}
	ev.Metrics["submitted"] = b2f(ep.submitted)
	return task.EndResult{HasReward: true, Reward: ev.Reward, RewardComponents: ev.Components, Metrics: ev.Metrics, Extra: ev.Extra}, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Evaluation is the outcome of the hidden tests of an instance.
type Evaluation struct {
	Reward     float64
	Components map[string]float64
	Metrics    map[string]float64
	Extra      map[string]any
}

// EvaluatePatch runs the hidden tests on a patch, apart from the episode that made it: a fresh
// instance (its own uid and files) is made from the row's snapshot, the patch is applied
// without its changes to test files (WithoutTestChanges), the files test_patch touches are
// reset and test_patch applied, and FAIL_TO_PASS + PASS_TO_PASS run once; the runner
// reports through a descriptor of its own (sandbox.RunTests). A patch that does not apply
// gets 0.
func EvaluatePatch(ctx context.Context, sb sandbox.Backend, patch string, spec Spec, wall time.Duration) (Evaluation, error) {
	files, added, removed := sandbox.PatchStats(patch)
	kept, dropped := WithoutTestChanges(patch, spec)
	info, err := sb.Create(ctx, sandbox.CreateRequest{Files: spec.Snapshot, BaseCommit: spec.BaseCommit})
	if err != nil {
		return Evaluation{}, err
	}
	defer func() { _ = sb.Delete(context.WithoutCancel(ctx), info.ID) }()
	tests := append(append([]string(nil), spec.FailToPass...), spec.PassToPass...)
	var rep sandbox.TestReport
	if strings.TrimSpace(kept) != "" {
		res, err := sb.ApplyPatch(ctx, info.ID, kept)
		if err != nil || res.ExitCode != 0 {
			why := fmt.Sprint(err)
			if err == nil {
				why = strings.TrimSpace(res.Stderr + res.Error)
			}
			rep = sandbox.TestReport{Results: map[string]string{}, Error: "the patch does not apply: " + why}
		}
	}
	if rep.Results == nil {
		if rep, err = sb.RunTests(ctx, info.ID, sandbox.TestRequest{Language: spec.Language, Tests: tests, TestPatch: spec.TestPatch,
			Limits: sandbox.Limits{Wall: wall, CPU: wall}}); err != nil {
			return Evaluation{}, err
		}
	}
	fixed, broken := 0, 0
	var failing []string
	for _, n := range spec.FailToPass {
		if rep.Results[n] == sandbox.Passed {
			fixed++
		} else {
			failing = append(failing, n)
		}
	}
	for _, n := range spec.PassToPass {
		if rep.Results[n] != sandbox.Passed {
			broken++
			failing = append(failing, n)
		}
	}
	resolved := fixed == len(spec.FailToPass) && broken == 0
	reward := b2f(resolved)
	frac := 0.0
	if len(spec.FailToPass) > 0 {
		frac = float64(fixed) / float64(len(spec.FailToPass))
	}
	sort.Strings(failing)
	extra := map[string]any{"instance_id": spec.InstanceID, "failing_tests": toAny(failing)}
	if rep.Error != "" {
		extra["test_error"] = rep.Error
	}
	if len(dropped) > 0 {
		extra["ignored_test_changes"] = toAny(dropped)
	}
	return Evaluation{
		Reward:     reward,
		Components: map[string]float64{"resolved": reward, "fail_to_pass_fraction": frac},
		Metrics: map[string]float64{"tests_fixed": float64(fixed), "tests_broken": float64(broken),
			"fail_to_pass_total": float64(len(spec.FailToPass)), "pass_to_pass_total": float64(len(spec.PassToPass)),
			"patch_files": float64(files), "patch_lines": float64(added + removed), "test_seconds": rep.Duration.Seconds()},
		Extra: extra,
	}, nil
}

func toAny(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// Score rates responses whose text holds a unified diff: the diff is applied to a fresh
// instance of the row's snapshot and the hidden tests decide, as in End. A response without
// a diff, or whose diff does not apply, scores 0. This is the path that shows a reference
// patch scoring 1.
func (t *Task) Score(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	out := make([]task.ScoreResult, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = t.scoreOne(ctx, it)
		}()
	}
	wg.Wait()
	return out, nil
}

func (t *Task) scoreOne(ctx context.Context, it task.ScoreItem) task.ScoreResult {
	zero := task.ScoreResult{Components: map[string]float64{"resolved": 0, "fail_to_pass_fraction": 0}}
	spec, err := SpecOf(it.GroundTruth, it.ExtraInfo)
	if err != nil {
		return task.ScoreResult{Err: err.Error()}
	}
	patch := ExtractPatch(it.Solution)
	if patch == "" {
		zero.Extra = map[string]any{"reason": "no unified diff in the response"}
		return zero
	}
	sb, err := t.sandbox()
	if err != nil {
		return task.ScoreResult{Err: err.Error()}
	}
	ev, err := EvaluatePatch(ctx, sb, patch, spec, t.config().TestWall)
	if err != nil {
		return task.ScoreResult{Err: err.Error()}
	}
	if e, ok := ev.Extra["test_error"].(string); ok && strings.HasPrefix(e, "the patch does not apply") {
		ev.Extra["reason"] = e
	}
	return task.ScoreResult{Score: ev.Reward, Components: ev.Components, Extra: ev.Extra}
}

// ExtractPatch finds a unified diff in a response: the last ```diff (or ```patch) block, or
// the text from its first "diff --git" or "--- " line.
func ExtractPatch(s string) string {
	for _, fence := range []string{"```diff\n", "```patch\n"} {
		if i := strings.LastIndex(s, fence); i >= 0 {
			body := s[i+len(fence):]
			if j := strings.Index(body, "\n```"); j >= 0 {
				body = body[:j+1]
			}
			return body
		}
	}
	for _, start := range []string{"diff --git ", "--- "} {
		if strings.HasPrefix(s, start) {
			return s
		}
		if i := strings.Index(s, "\n"+start); i >= 0 {
			return s[i+1:]
		}
	}
	return ""
}
