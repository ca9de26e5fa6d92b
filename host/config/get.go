package config

import (
	"fmt"
	"io"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Get returns the value of a key: int, float64, bool, string, []string (string or
// list keys), []float64, map[string]any (a section or free-form map, as a copy),
// or nil for null. Secrets are returned as they are: use Redacted to show them.
func (c *Config) Get(name string) (any, error) {
	if err := checkKeySyntax(name); err != nil {
		return nil, &Error{Key: name, Msg: err.Error()}
	}
	if a, ok := aliases[name]; ok {
		name = a
	}
	if k, ok := keyByName[name]; ok {
		return export(c.field(k)), nil
	}
	if aliasSections[name] {
		m := map[string]any{}
		for _, a := range childNames[name] {
			m[lastPart(a)], _ = c.Get(a)
		}
		return m, nil
	}
	if k, ok := freeFormOf(name); ok {
		v, found := lookupPath(c.field(k).Interface().(map[string]any), strings.Split(name[len(k.name)+1:], "."))
		if !found {
			return nil, &Error{Key: name, Msg: fmt.Sprintf("%s is not set", name)}
		}
		return deepCopy(v), nil
	}
	if _, ok := compatOf(name); ok {
		v, _ := lookupPath(c.compat, strings.Split(name, "."))
		return deepCopy(v), nil
	}
	return nil, &Error{Key: name, Msg: unknownKey(name)}
}

func lookupPath(m map[string]any, path []string) (any, bool) {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// export converts a Config field to the plain values Get returns.
func export(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return export(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if tag := f.Tag.Get("yaml"); tag != "" && f.IsExported() {
				m[tag] = export(v.Field(i))
			}
		}
		return m
	case reflect.Map:
		return deepCopy(v.Interface())
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		if v.Type() == stringListType {
			return append([]string{}, v.Interface().(StringList)...)
		}
		return append([]float64{}, v.Interface().([]float64)...)
	}
	return v.Interface()
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = deepCopy(x)
		}
		return l
	}
	return v
}

// Redacted returns the whole config as nested maps (the form Get returns for a
// section), with the keys accepted for compatibility that were set, and every
// secret replaced by "***": the value of a key that IsSecret, and the password
// and secret query parameters of URLs.
func (c *Config) Redacted() map[string]any {
	m := export(reflect.ValueOf(c).Elem()).(map[string]any)
	if c.compat != nil {
		mergeMaps(m, deepCopy(c.compat).(map[string]any))
	}
	return redact(m).(map[string]any)
}

func redact(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if IsSecret(k) && x != nil {
				v[k] = "***"
			} else {
				v[k] = redact(x)
			}
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = redact(x)
		}
		return v
	case []string:
		for i, x := range v {
			v[i] = redactURL(x)
		}
		return v
	case string:
		return redactURL(v)
	}
	return v
}

// redactURL hides the password and secret query parameters of a URL.
func redactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	changed := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "***")
			changed = true
		}
	}
	if q := u.Query(); len(q) > 0 {
		for k := range q {
			if IsSecret(k) {
				q.Set(k, "***")
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(u.String(), "%2A", "*"), "%2a", "*")
}

// IsSecret reports whether a key holds a secret, from its last dotted part: it
// contains "secret", "password", "passwd", "credential", "api_key"/"apikey",
// "private_key" or "authorization", or its last word is "token" (hf_token,
// access_token, apiToken; not max_tokens, token2text or token_budget). Words are
// split at "_", "-" and camelCase.
func IsSecret(key string) bool {
	words := splitWords(lastPart(key))
	for i, w := range words {
		switch {
		case strings.Contains(w, "secret"), strings.Contains(w, "password"), strings.Contains(w, "credential"),
			w == "passwd", w == "apikey", w == "authorization":
			return true
		case (w == "api" || w == "private") && i+1 < len(words) && words[i+1] == "key":
			return true
		case w == "token" && i == len(words)-1:
			return true
		}
	}
	return false
}

func splitWords(s string) []string {
	var words []string
	var cur []rune
	rs := []rune(s)
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == ' ':
			flush()
			continue
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) ||
			(unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]))):
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// WriteYAML writes the config, redacted, as YAML that Load reads back: sections
// in veRL's order, free-form maps sorted.
func (c *Config) WriteYAML(w io.Writer) error {
	root := toNode(c.Redacted(), "")
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root},
		HeadComment: "rlhost run configuration (resolved; secrets shown as ***)"}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("config: writing YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("config: writing YAML: %w", err)
	}
	return nil
}

// toNode builds the YAML of a value; name is its dotted key, which orders the
// children of known sections as Keys does.
func toNode(v any, name string) *yaml.Node {
	switch v := v.(type) {
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		var keys []string
		done := map[string]bool{}
		if k, known := keyByName[name]; name == "" || (known && k.section) {
			for _, child := range childNames[name] {
				p := lastPart(child)
				if _, ok := v[p]; ok && !done[p] {
					keys, done[p] = append(keys, p), true
				}
			}
		}
		var rest []string
		for k := range v {
			if !done[k] {
				rest = append(rest, k)
			}
		}
		sort.Strings(rest)
		for _, k := range append(keys, rest...) {
			child := k
			if name != "" {
				child = name + "." + k
			}
			n.Content = append(n.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k},
				toNode(v[k], child))
		}
		if len(n.Content) == 0 {
			n.Style = yaml.FlowStyle
		}
		return n
	case []string:
		if len(v) == 1 { // veRL writes a single file as a string
			return toNode(v[0], name)
		}
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for _, s := range v {
			n.Content = append(n.Content, toNode(s, name))
		}
		return n
	case []float64:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for _, x := range v {
			n.Content = append(n.Content, toNode(x, name))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		flow := true
		for _, x := range v {
			switch x.(type) {
			case map[string]any, []any:
				flow = false
			}
			n.Content = append(n.Content, toNode(x, name))
		}
		if flow {
			n.Style = yaml.FlowStyle
		}
		return n
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEnN") {
			s += ".0"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: s}
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
		return n
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: fmt.Sprint(v)}
	}
	return n
}

// Warnings lists what was accepted but changes nothing: veRL keys without effect
// that were set, and settings rlhost runs differently.
func (c *Config) Warnings() []string {
	var out []string
	seen := append([]string(nil), c.compatSeen...)
	sort.Strings(seen)
	for _, ck := range seen {
		s := ck + ": accepted for veRL compatibility, no effect"
		if r := compatKeys[ck]; r != "" {
			s += " (" + r + ")"
		}
		out = append(out, s)
	}
	if n := c.ActorRolloutRef.Rollout.Name; n == "openai" {
		if c.ActorRolloutRef.Rollout.Engine.UpdateWeightsURL == "" {
			out = append(out, "actor_rollout_ref.rollout.engine.update_weights_url is empty: the engine keeps its initial weights, so rollouts after step 1 are off-policy")
		}
	} else if n != "cpu" {
		out = append(out, fmt.Sprintf("actor_rollout_ref.rollout.name=%s: rlhost generates with its built-in engine", n))
	}
	mt := c.ActorRolloutRef.Rollout.MultiTurn
	if mt.ToolConfigPath != nil {
		out = append(out, "actor_rollout_ref.rollout.multi_turn.tool_config_path is not read: tools come from the task plugin")
	}
	if mt.InteractionConfigPath != nil {
		out = append(out, "actor_rollout_ref.rollout.multi_turn.interaction_config_path is not read: it turns on the task plugin's interaction")
	}
	switch e := c.Algorithm.AdvEstimator; e {
	case "grpo", "rloo", "grpo_passk", "reinforce_plus_plus_baseline":
		if c.ActorRolloutRef.Rollout.N == 1 {
			out = append(out, fmt.Sprintf("algorithm.adv_estimator=%s with actor_rollout_ref.rollout.n=1: every group holds one response, so there is no group baseline (as in veRL)", e))
		}
	}
	if t := c.Trainer; t.NGPUsPerNode != 1 || t.NNodes != 1 {
		out = append(out, fmt.Sprintf("trainer.n_gpus_per_node=%d trainer.nnodes=%d: rlhost trains in one process", t.NGPUsPerNode, t.NNodes))
	}
	return out
}
