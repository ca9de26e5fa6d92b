package config

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// TaskNames is task.name as a list: each entry split at commas, blanks trimmed, empty
// parts dropped ("gsm8k,dr" and [gsm8k, dr] are the same two tasks).
func (c *Config) TaskNames() []string {
	var out []string
	for _, e := range c.Task.Name {
		for _, p := range strings.Split(e, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// TaskConfig is the config a task's Configure gets: task.configs.NAME if set, else
// task.config.
func (c *Config) TaskConfig(name string) (map[string]any, error) {
	v, ok := c.Task.Configs[name]
	if !ok {
		return c.Task.Config, nil
	}
	if v == nil {
		return map[string]any{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Key: "task.configs." + name, Msg: fmt.Sprintf("task.configs.%s must be a map of the task's config keys, got %s", name, kindOf(v))}
	}
	return m, nil
}

// ScoreTimeout is task.timeouts.score in seconds, reward_model.timeout when null.
func (c *Config) ScoreTimeout() float64 {
	if s := c.Task.Timeouts.Score; s != nil {
		return *s
	}
	return c.RewardModel.Timeout
}

// TaskRewardWeight is task.reward_weights.NAME, 1 when unset.
func (c *Config) TaskRewardWeight(name string) float64 {
	if w, ok := number(c.Task.RewardWeights[name]); ok {
		return w
	}
	return 1
}

// SamplingWeights is data.sampling_weights as numbers (nil when empty).
func (c *Config) SamplingWeights() map[string]float64 {
	if len(c.Data.SamplingWeights) == 0 {
		return nil
	}
	out := map[string]float64{}
	for k, v := range c.Data.SamplingWeights {
		w, _ := number(v)
		out[k] = w
	}
	return out
}

// validateTasks checks task.* and data.sampling_weights.
func (c *Config) validateTasks(v *validator) {
	names := c.TaskNames()
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			v.add("task.name", "task.name lists %q twice", n)
		}
		seen[n] = true
		// A path names the task of its binary (.../rlhost-task-NAME): NAME is a key too.
		if b := filepath.Base(n); b != n {
			seen[strings.TrimPrefix(b, "rlhost-task-")] = true
		}
	}
	known := strings.Join(names, ", ")
	for _, k := range sortedKeys(c.Task.Configs) {
		if len(names) > 0 && !seen[k] {
			v.add("task.configs."+k, "task.configs.%s: %q is not a task of this run (task.name: %s)", k, k, known)
		}
		if _, err := c.TaskConfig(k); err != nil {
			v.errs = append(v.errs, err)
		}
	}
	for _, k := range sortedKeys(c.Task.RewardWeights) {
		if len(names) > 0 && !seen[k] {
			v.add("task.reward_weights."+k, "task.reward_weights.%s: %q is not a task of this run (task.name: %s)", k, k, known)
		}
		if w, ok := number(c.Task.RewardWeights[k]); !ok {
			v.add("task.reward_weights."+k, "task.reward_weights.%s must be a number, got %s", k, kindOf(c.Task.RewardWeights[k]))
		} else if !(w >= 0) {
			v.add("task.reward_weights."+k, "task.reward_weights.%s must be >= 0, got %g", k, w)
		}
	}
	sum := 0.0
	for _, k := range sortedKeys(c.Data.SamplingWeights) {
		w, ok := number(c.Data.SamplingWeights[k])
		switch {
		case !ok:
			v.add("data.sampling_weights."+k, "data.sampling_weights.%s must be a number, got %s", k, kindOf(c.Data.SamplingWeights[k]))
		case !(w >= 0) || w > 1e300:
			v.add("data.sampling_weights."+k, "data.sampling_weights.%s must be a finite number >= 0, got %g", k, w)
		default:
			sum += w
		}
	}
	if len(c.Data.SamplingWeights) > 0 && sum == 0 {
		v.add("data.sampling_weights", "data.sampling_weights: every weight is 0; give at least one data_source a positive weight")
	}
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
