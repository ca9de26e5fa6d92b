package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestTaskNames(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{"task.name=gsm8k", []string{"gsm8k"}},
		{"task.name=gsm8k,dr", []string{"gsm8k", "dr"}},
		{"task.name=[gsm8k, ' dr ,arith']", []string{"gsm8k", "dr", "arith"}},
		{"task.name=null", nil},
	} {
		c := Default()
		if err := c.Apply(tc.set); err != nil {
			t.Fatal(err)
		}
		if got := c.TaskNames(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: TaskNames() = %q, want %q", tc.set, got, tc.want)
		}
	}
}

// The table of mixed-run settings and the message each bad one must give.
var taskValidateCases = []struct {
	sets []string
	want string // "" = valid
}{
	{[]string{"task.name=gsm8k,dr", "task.configs.dr.hops=2", "task.reward_weights.gsm8k=0.5"}, ""},
	{[]string{"task.name=gsm8k,gsm8k"}, `task.name lists "gsm8k" twice`},
	{[]string{"task.name=gsm8k", "task.configs.dr.hops=2"}, `task.configs.dr: "dr" is not a task of this run (task.name: gsm8k)`},
	{[]string{"task.name=gsm8k", "task.configs.gsm8k=3"}, "task.configs.gsm8k must be a map"},
	{[]string{"task.name=gsm8k", "task.reward_weights.gsm8k=x"}, "task.reward_weights.gsm8k must be a number, got a string"},
	{[]string{"task.name=gsm8k", "task.reward_weights.gsm8k=-1"}, "task.reward_weights.gsm8k must be >= 0"},
	{[]string{"task.name=gsm8k", "task.reward_weights.arith=1"}, `task.reward_weights.arith: "arith" is not a task of this run`},
	{[]string{"data.sampling_weights={openai/gsm8k: 3, arith: 1}"}, ""},
	{[]string{"data.sampling_weights={openai/gsm8k: 0}"}, "every weight is 0"},
	{[]string{"data.sampling_weights={openai/gsm8k: -2}"}, "data.sampling_weights.openai/gsm8k must be a finite number >= 0, got -2"},
}

func TestValidateTasks(t *testing.T) {
	for _, tc := range taskValidateCases {
		c := Default()
		for _, s := range tc.sets {
			if err := c.Apply(s); err != nil {
				t.Fatalf("%v: %v", tc.sets, err)
			}
		}
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: unexpected error %v", tc.sets, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one containing %q", tc.sets, err, tc.want)
		}
	}
	if err := Default().Apply("task.adv_norm_scope=batch"); err == nil || !strings.Contains(err.Error(), `"batch" is not one of global, task`) {
		t.Errorf("task.adv_norm_scope=batch: %v", err)
	}
	c := Default()
	c.Apply("task.name=gsm8k,dr")
	c.Apply("task.config={a: 1}")
	c.Apply("task.configs.dr={hops: 2}")
	c.Apply("task.reward_weights.dr=0.25")
	g, _ := c.TaskConfig("gsm8k")
	d, _ := c.TaskConfig("dr")
	if !reflect.DeepEqual(g, map[string]any{"a": 1}) || !reflect.DeepEqual(d, map[string]any{"hops": 2}) {
		t.Errorf("TaskConfig: gsm8k %v, dr %v", g, d)
	}
	if c.TaskRewardWeight("dr") != 0.25 || c.TaskRewardWeight("gsm8k") != 1 {
		t.Errorf("TaskRewardWeight: dr %v gsm8k %v", c.TaskRewardWeight("dr"), c.TaskRewardWeight("gsm8k"))
	}
}

// data.apply_chat_template_kwargs reaches the config as typed values (a bool
// stays a bool: the template tests enable_thinking is false), and
// multi_turn.format takes the tool-call formats and nothing else.
func TestChatTemplateKeys(t *testing.T) {
	c := Default()
	if err := c.Apply("data.apply_chat_template_kwargs={enable_thinking: false, date_string: '1 Jan 2025'}"); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"enable_thinking": false, "date_string": "1 Jan 2025"}
	if got := c.Data.ApplyChatTemplateKwargs; !reflect.DeepEqual(got, want) {
		t.Errorf("kwargs = %#v, want %#v", got, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("kwargs: %v", err)
	}
	bad := Default()
	if err := bad.Apply("data.apply_chat_template_kwargs={tools: []}"); err != nil {
		t.Fatal(err)
	}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "data.apply_chat_template_kwargs.tools") {
		t.Errorf("kwarg tools: %v, want an error naming the key", err)
	}
	if f := Default().ActorRolloutRef.Rollout.MultiTurn.Format; f != "auto" {
		t.Errorf("default format %q, want auto", f)
	}
	for _, f := range []string{"hermes", "llama3_json", "mistral", "auto"} {
		c := Default()
		if err := c.Apply("actor_rollout_ref.rollout.multi_turn.format=" + f); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("format %s: %v", f, err)
		}
	}
	c = Default()
	err := c.Apply("actor_rollout_ref.rollout.multi_turn.format=llama3")
	if err == nil {
		err = c.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "llama3_json") {
		t.Errorf("format llama3: %v, want an error naming llama3_json", err)
	}
}
