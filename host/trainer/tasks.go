package trainer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/rollout"
	sdkplugin "github.com/rlhost/rlhost/sdk/plugin"
	"github.com/rlhost/rlhost/sdk/task"
)

// A run trains on one or more tasks (task.name). Each task is its own plugin process and
// declares in its Info the data_source values it serves; every dataset row goes to the task
// that serves its data_source. Trajectories of different tasks never share a GRPO group (a
// group is the n rollouts of one row), and rollouts, scores, metrics and errors are kept per
// task.

// runTask is one task plugin of the run.
type runTask struct {
	name    string
	p       *plugin.Task
	sources []string // Info.DataSources
	weight  float64  // task.reward_weights.NAME
}

// taskSet is the run's tasks and the routing of data_source values to them.
type taskSet struct {
	list     []*runTask
	bySource map[string]*runTask
	log      hclog.Logger
	warned   sync.Map // data_source -> struct{}: single-task runs warn once per undeclared source
}

// openTasks starts every task plugin of task.name. Two tasks that declare the same
// data_source are an error; so is a task of a mixed run that declares none.
func openTasks(ctx context.Context, cfg *config.Config, opts plugin.Options, hs *task.HostService, log hclog.Logger) (*taskSet, error) {
	names := cfg.TaskNames()
	if len(names) == 0 {
		return nil, fmt.Errorf("trainer: no task: pass --task NAME (or set task.name)")
	}
	s := &taskSet{bySource: map[string]*runTask{}, log: log}
	seen := map[string]string{}
	for _, n := range names {
		bin, err := plugin.Find(sdkplugin.KindTask, n)
		if err != nil {
			s.Close()
			return nil, err
		}
		// A task is named by its plugin's name (the binary rlhost-task-NAME), also when
		// task.name gives a path; task.configs and task.reward_weights take either.
		key := n
		if _, ok := cfg.Task.Configs[n]; !ok {
			key = bin.Name
		}
		if o, dup := seen[bin.Name]; dup {
			s.Close()
			return nil, fmt.Errorf("trainer: task.name: %s and %s are both the task %s", o, n, bin.Name)
		}
		seen[bin.Name] = n
		tc, err := cfg.TaskConfig(key)
		if err != nil {
			s.Close()
			return nil, err
		}
		p, err := plugin.OpenTaskBinaryWith(ctx, bin, tc, opts, plugin.TaskOptions{Host: hs, Timeouts: Timeouts(cfg)})
		if err != nil {
			s.Close()
			if len(names) > 1 {
				return nil, fmt.Errorf("trainer: task %s: %w", bin.Name, err)
			}
			return nil, err
		}
		weight := cfg.TaskRewardWeight(bin.Name)
		if _, ok := cfg.Task.RewardWeights[n]; ok {
			weight = cfg.TaskRewardWeight(n)
		}
		rt := &runTask{name: bin.Name, p: p, sources: p.CachedInfo().DataSources, weight: weight}
		s.list = append(s.list, rt)
		if len(names) > 1 && len(rt.sources) == 0 {
			s.Close()
			return nil, fmt.Errorf("trainer: task %s declares no data_source in its Info (Info.DataSources), so no row can be routed to it in a mixed run; run it alone or add its data sources to the plugin", rt.name)
		}
		for _, ds := range rt.sources {
			if o, ok := s.bySource[ds]; ok {
				s.Close()
				return nil, fmt.Errorf("trainer: tasks %s and %s both declare data_source %q: a row must have one task; run them in separate runs", o.name, rt.name, ds)
			}
			s.bySource[ds] = rt
		}
	}
	return s, nil
}

// Timeouts are the limits of the task plugins' calls: task.timeouts.* (Score: task.timeouts.score,
// else reward_model.timeout).
func Timeouts(cfg *config.Config) plugin.Timeouts {
	sec := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	to := cfg.Task.Timeouts
	return plugin.Timeouts{Configure: sec(to.Configure), Prompt: sec(to.Prompt), Start: sec(to.Start), Obs: sec(to.Obs),
		End: sec(to.End), Score: sec(cfg.ScoreTimeout()), Preprocess: sec(to.Preprocess)}
}

// waitReport is how long a call must have been in flight before the progress line names it.
var waitReport = 5 * time.Second

// waitingOn says which plugin call the run has waited on longest, when one has been in flight
// for waitReport or more: "waiting on rlhost-task-x Obs of trajectory s1-0-1 for 12s (3 calls
// over 5s)"; "" otherwise. Progress bars show it.
func (s *taskSet) waitingOn() string {
	var late []plugin.Pending
	now := time.Now()
	for _, t := range s.list {
		for _, p := range t.p.Pending() {
			if now.Sub(p.Since) >= waitReport {
				late = append(late, p)
			}
		}
	}
	if len(late) == 0 {
		return ""
	}
	sort.Slice(late, func(i, j int) bool { return late[i].Since.Before(late[j].Since) })
	p := late[0]
	call := p.Call
	if p.What != "" {
		call += " of " + p.What
	}
	msg := fmt.Sprintf("waiting on %s %s for %s", p.Plugin, call, now.Sub(p.Since).Round(time.Second))
	if len(late) > 1 {
		msg += fmt.Sprintf(" (%d calls over %s)", len(late), waitReport)
	}
	return msg
}

// Close stops every plugin.
func (s *taskSet) Close() {
	for _, t := range s.list {
		t.p.Close()
	}
}

// mixed reports whether the run has several tasks.
func (s *taskSet) mixed() bool { return len(s.list) > 1 }

// route returns the task of a data_source. A run of one task takes every row (a source it
// does not declare is logged once); a mixed run takes only declared sources.
func (s *taskSet) route(ds string) (*runTask, bool) {
	if t, ok := s.bySource[ds]; ok {
		return t, true
	}
	if !s.mixed() {
		if _, seen := s.warned.LoadOrStore(ds, struct{}{}); !seen && len(s.list[0].sources) > 0 {
			s.log.Warn("rows of a data_source the task does not declare go to it (the run has one task)",
				"task", s.list[0].name, "data_source", ds, "declared", strings.Join(s.list[0].sources, ", "))
		}
		return s.list[0], true
	}
	return nil, false
}

// describe lists the tasks and their data sources, for errors.
func (s *taskSet) describe() string {
	var parts []string
	for _, t := range s.list {
		parts = append(parts, fmt.Sprintf("%s (%s)", t.name, strings.Join(t.sources, ", ")))
	}
	return strings.Join(parts, "; ")
}

// has reports whether any task declared feature f.
func (s *taskSet) has(f string) bool {
	for _, t := range s.list {
		if t.p.CachedInfo().Has(f) {
			return true
		}
	}
	return false
}

// groupByTask splits sample indexes by the task of their row, in the order of s.list; every
// task of s.list, with indexes or without, when every is set.
func (s *taskSet) groupByTask(n int, dataSource func(i int) string, every bool) ([]*runTask, [][]int) {
	idx := map[*runTask][]int{}
	for i := 0; i < n; i++ {
		t, _ := s.route(dataSource(i))
		idx[t] = append(idx[t], i)
	}
	var ts []*runTask
	var out [][]int
	for _, t := range s.list {
		if len(idx[t]) > 0 || every {
			ts = append(ts, t)
			out = append(out, idx[t])
		}
	}
	return ts, out
}

// taskOf returns the task of an output's row.
func (t *Trainer) taskOf(o *rollout.Output) *runTask {
	rt, _ := t.tasks.route(o.Sample.Row.DataSource)
	return rt
}

// sortedNames returns a map's keys in order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
