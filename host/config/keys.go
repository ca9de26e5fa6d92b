package config

import (
	"reflect"
	"sort"
	"strings"

	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/reward"
)

// KeyInfo describes one key.
type KeyInfo struct {
	Name        string   // dotted veRL name, e.g. "data.train_batch_size"
	Type        string   // "int", "float", "bool", "string", "enum", "int or null", "string or list", "map", ...
	Default     any      // the default as Get returns it (nil = null)
	Values      []string // the allowed values of an enum
	Description string
	AliasOf     string // for another spelling: the key it sets
	NoEffect    bool   // accepted for veRL compatibility, ignored
}

// key is a key of the Config struct.
type key struct {
	name     string
	index    []int // field index path from Config
	typ      reflect.Type
	doc      string
	enum     []string
	section  bool // a struct of keys
	freeForm bool // a map that takes any keys
}

// aliases maps other veRL spellings, older (trainer.rollout_trace.*) or newer
// (veRL 0.9's reward.*), to the key they set.
var aliases = map[string]string{
	"trainer.rollout_trace.backend":                                   "actor_rollout_ref.rollout.trace.backend",
	"trainer.rollout_trace.token2text":                                "actor_rollout_ref.rollout.trace.token2text",
	"actor_rollout_ref.rollout.trace.max_samples_per_step_per_worker": "actor_rollout_ref.rollout.trace.max_samples_per_step",
	"trainer.val_generations_to_log_to_wandb":                         "trainer.log_val_generations",
	"actor_rollout_ref.actor.optim.lr_scheduler_type":                 "actor_rollout_ref.actor.optim.warmup_style",
	"critic.optim.lr_scheduler_type":                                  "critic.optim.warmup_style",
	"actor_rollout_ref.actor.optim.clip_grad":                         "actor_rollout_ref.actor.grad_clip",
	"critic.optim.clip_grad":                                          "critic.grad_clip",
	"reward.reward_manager.name":                                      "reward_model.reward_manager",
	"reward.num_workers":                                              "reward_model.num_workers",
	// veRL's deprecated global micro-batch sizes: one process here, so the same thing.
	"actor_rollout_ref.actor.ppo_micro_batch_size":        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
	"actor_rollout_ref.ref.log_prob_micro_batch_size":     "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
	"actor_rollout_ref.rollout.log_prob_micro_batch_size": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
	"critic.ppo_micro_batch_size":                         "critic.ppo_micro_batch_size_per_gpu",
}

// nullMeansUnset are the aliases whose null (veRL's default) leaves the key alone.
var nullMeansUnset = map[string]bool{
	"actor_rollout_ref.actor.ppo_micro_batch_size":        true,
	"actor_rollout_ref.ref.log_prob_micro_batch_size":     true,
	"actor_rollout_ref.rollout.log_prob_micro_batch_size": true,
	"critic.ppo_micro_batch_size":                         true,
}

// aliasSections are sections that exist only as the parents of aliases.
var aliasSections = map[string]bool{"trainer.rollout_trace": true, "reward": true, "reward.reward_manager": true}

var (
	keyByName  map[string]*key
	keyList    []*key              // Config order
	childNames map[string][]string // section ("" = root) -> child names in Config order
)

// implEnums are the keys whose values are what host/algo and host/reward implement.
var implEnums = map[string][]string{
	"reward_model.reward_manager":           reward.Kinds,
	"algorithm.adv_estimator":               algo.Estimators,
	"algorithm.kl_penalty":                  algo.KLKinds,
	"actor_rollout_ref.actor.kl_loss_type":  algo.KLKinds,
	"actor_rollout_ref.actor.loss_agg_mode": algo.AggModes,
	"critic.loss_agg_mode":                  algo.AggModes,
}

func init() {
	keyByName = map[string]*key{}
	childNames = map[string][]string{}
	walkKeys(reflect.TypeOf(Config{}), "", nil)
	for name, values := range implEnums {
		keyByName[name].enum = append([]string(nil), values...)
	}
	for a := range aliases {
		parent := parentOf(a)
		childNames[parent] = append(childNames[parent], a)
	}
	for s := range aliasSections {
		childNames[parentOf(s)] = append(childNames[parentOf(s)], s)
	}
	for c := range compatKeys {
		childNames[parentOf(c)] = append(childNames[parentOf(c)], c)
	}
}

func walkKeys(t reflect.Type, prefix string, index []int) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "" || !f.IsExported() {
			continue
		}
		name := tag
		if prefix != "" {
			name = prefix + "." + tag
		}
		idx := append(append([]int(nil), index...), i)
		k := &key{name: name, index: idx, typ: f.Type, doc: f.Tag.Get("doc")}
		if e := f.Tag.Get("enum"); e != "" {
			k.enum = strings.Split(e, "|")
		}
		keyByName[name] = k
		keyList = append(keyList, k)
		childNames[prefix] = append(childNames[prefix], name)
		switch {
		case f.Type.Kind() == reflect.Struct:
			k.section = true
			walkKeys(f.Type, name, idx)
		case f.Type.Kind() == reflect.Map:
			k.freeForm = true
		}
	}
}

func parentOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return ""
}

func lastPart(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

// compatOf returns the compatibility key that name is or lies under.
func compatOf(name string) (string, bool) {
	for n := name; n != ""; n = parentOf(n) {
		if _, ok := compatKeys[n]; ok {
			return n, true
		}
	}
	return "", false
}

// freeFormOf returns the free-form map key that name lies strictly under.
func freeFormOf(name string) (*key, bool) {
	for n := parentOf(name); n != ""; n = parentOf(n) {
		if k, ok := keyByName[n]; ok {
			return k, k.freeForm
		}
	}
	return nil, false
}

// Keys lists every key: the typed keys in the order of the Config struct, then the
// other spellings, then the keys accepted without effect.
func Keys() []KeyInfo {
	def := Default()
	var out []KeyInfo
	for _, k := range keyList {
		if k.section {
			continue
		}
		v, _ := def.Get(k.name)
		out = append(out, KeyInfo{
			Name: k.name, Type: typeName(k), Default: v, Values: k.enum, Description: k.doc,
		})
	}
	var names []string
	for a := range aliases {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		t := keyByName[aliases[a]]
		out = append(out, KeyInfo{
			Name: a, Type: typeName(t), Values: t.enum, AliasOf: aliases[a],
			Description: "another spelling of " + aliases[a],
		})
	}
	names = names[:0]
	for c := range compatKeys {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		d := "accepted for veRL compatibility; no effect"
		if r := compatKeys[c]; r != "" {
			d += " (" + r + ")"
		}
		out = append(out, KeyInfo{Name: c, Type: "any", Description: d, NoEffect: true})
	}
	return out
}

func typeName(k *key) string {
	t := k.typ
	null := ""
	if t.Kind() == reflect.Pointer {
		t, null = t.Elem(), " or null"
	}
	switch {
	case t == reflect.TypeOf(StringList(nil)):
		return "string or list"
	case len(k.enum) > 0:
		return "enum" + null
	}
	switch t.Kind() {
	case reflect.Int:
		return "int" + null
	case reflect.Float64:
		return "float" + null
	case reflect.Bool:
		return "bool" + null
	case reflect.String:
		return "string" + null
	case reflect.Slice:
		return "list of " + map[reflect.Kind]string{reflect.Float64: "float", reflect.String: "string"}[t.Elem().Kind()]
	case reflect.Map:
		return "map"
	}
	return t.String()
}

// knownNames lists every name Set accepts exactly (sections included).
func knownNames() []string {
	var out []string
	for _, k := range keyList {
		out = append(out, k.name)
	}
	for a := range aliases {
		out = append(out, a)
	}
	for s := range aliasSections {
		out = append(out, s)
	}
	for c := range compatKeys {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}
