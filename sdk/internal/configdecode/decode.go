// Package configdecode decodes a plugin's config section (a JSON object, decoded) into the
// plugin's own struct: task.DecodeConfig and trace.DecodeConfig, which document the rules, are
// this package with their SDK's error kind.
package configdecode

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/rlhost/rlhost/sdk/suggest"
)

// Error is a config that does not fit the struct: an unknown key or a value of the wrong
// type. Msg names the plugin and the key.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Decode decodes config into dst, a pointer to a struct with `config` tags (see
// task.DecodeConfig). A config that does not fit is an *Error; a dst it cannot fill (the
// plugin's mistake) another error.
func Decode(plugin string, config map[string]any, dst any) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("dst is %T, want a pointer to a struct", dst)
	}
	d := configDecoder{plugin: plugin}
	if err := checkConfigType(v.Elem().Type(), map[reflect.Type]bool{}); err != nil {
		return err
	}
	return d.object("", config, v.Elem())
}

type configDecoder struct{ plugin string }

// configField is one key of a config struct.
type configField struct {
	key    string
	index  []int // reflect.Value.FieldByIndex, through inline structs
	want   string
	secret bool
}

var durationType = reflect.TypeFor[time.Duration]()

// configFields lists the keys of struct type t, in field order.
func configFields(t reflect.Type) []configField {
	var out []configField
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("config")
		if !ok || !f.IsExported() {
			continue
		}
		if tag == ",inline" {
			for _, in := range configFields(f.Type) {
				in.index = append([]int{i}, in.index...)
				out = append(out, in)
			}
			continue
		}
		out = append(out, configField{key: tag, index: []int{i}, want: f.Tag.Get("want"), secret: f.Tag.Get("secret") == "true"})
	}
	return out
}

// checkConfigType reports a field type DecodeConfig cannot fill (a mistake in the plugin, not
// in the config), whether or not the config has its key.
func checkConfigType(t reflect.Type, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64, reflect.Interface,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t.Kind() == reflect.Interface && t.NumMethod() != 0 {
			return fmt.Errorf("type %v is not supported", t)
		}
		return nil
	case reflect.Pointer, reflect.Slice:
		return checkConfigType(t.Elem(), seen)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return fmt.Errorf("type %v is not supported (map keys must be strings)", t)
		}
		return checkConfigType(t.Elem(), seen)
	case reflect.Struct:
		keys := map[string]bool{}
		for i := range t.NumField() {
			f := t.Field(i)
			tag, ok := f.Tag.Lookup("config")
			if !ok {
				continue
			}
			if !f.IsExported() {
				return fmt.Errorf("field %v.%s has a config tag but is not exported", t, f.Name)
			}
			if tag == ",inline" && f.Type.Kind() != reflect.Struct {
				return fmt.Errorf("inline field %v.%s is not a struct", t, f.Name)
			}
			if tag == "" || (strings.ContainsAny(tag, ".[],") && tag != ",inline") {
				return fmt.Errorf("field %v.%s: config key %q is empty or holds one of . [ ] ,", t, f.Name, tag)
			}
			if err := checkConfigType(f.Type, seen); err != nil {
				return fmt.Errorf("field %v.%s: %v", t, f.Name, err)
			}
		}
		for _, f := range configFields(t) {
			if keys[f.key] {
				return fmt.Errorf("%v: config key %q appears twice", t, f.key)
			}
			keys[f.key] = true
		}
		return nil
	}
	return fmt.Errorf("type %v is not supported", t)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object decodes the keys of m into the struct v; path names v in errors ("" at the top).
func (d configDecoder) object(path string, m map[string]any, v reflect.Value) error {
	fields := configFields(v.Type())
	byKey := make(map[string]configField, len(fields))
	names := make([]string, len(fields))
	for i, f := range fields {
		byKey[f.key] = f
		names[i] = f.key
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, ok := byKey[k]
		if !ok {
			known := make([]string, len(names))
			for i, n := range names {
				known[i] = join(path, n)
			}
			msg := fmt.Sprintf("%s config: unknown key %q (known: %s)", d.plugin, join(path, k), strings.Join(known, ", "))
			if len(names) == 0 {
				msg = fmt.Sprintf("%s config: unknown key %q (this %s takes no keys)", d.plugin, join(path, k),
					map[bool]string{true: "plugin", false: "object"}[path == ""])
			}
			if s := suggest.Closest(k, names); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", join(path, s))
			}
			return &Error{msg}
		}
		if err := d.value(join(path, k), f.want, f.secret, m[k], v.FieldByIndex(f.index)); err != nil {
			return err
		}
	}
	return nil
}

// wrong is the error of a value x that is not what key wants.
func (d configDecoder) wrong(key, want string, secret bool, x any) error {
	got := shortJSON(x)
	if secret {
		got = Kind(x)
	}
	return &Error{fmt.Sprintf("%s config key %q: want %s, got %s", d.plugin, key, want, got)}
}

// shortJSON is x as JSON, cut to 80 bytes.
func shortJSON(x any) string {
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// value decodes x into v; key names it in errors, want (when not "") says what it takes, and
// secret keeps x out of them.
func (d configDecoder) value(key, want string, secret bool, x any, v reflect.Value) error {
	t := v.Type()
	wants := func(def string) string {
		if want != "" {
			return want
		}
		return def
	}
	switch {
	case t.Kind() == reflect.Interface:
		if x == nil {
			v.SetZero()
		} else {
			v.Set(reflect.ValueOf(x))
		}
		return nil
	case t.Kind() == reflect.Pointer:
		if x == nil {
			v.SetZero()
			return nil
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return d.value(key, want, secret, x, v.Elem())
	case t == durationType:
		f, ok := number(x)
		if !ok || math.Abs(f*float64(time.Second)) >= math.MaxInt64 || math.IsNaN(f) {
			return d.wrong(key, wants("a number of seconds"), secret, x)
		}
		v.SetInt(int64(f * float64(time.Second)))
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		s, ok := x.(string)
		if !ok {
			return d.wrong(key, wants("a string"), secret, x)
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			return d.wrong(key, wants("true or false"), secret, x)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := integer(x)
		if !ok || v.OverflowInt(i) {
			return d.wrong(key, wants("an integer"), secret, x)
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		i, ok := integer(x)
		if !ok || i < 0 || v.OverflowUint(uint64(i)) {
			return d.wrong(key, wants("a non-negative integer"), secret, x)
		}
		v.SetUint(uint64(i))
	case reflect.Float32, reflect.Float64:
		f, ok := number(x)
		if !ok || v.OverflowFloat(f) {
			return d.wrong(key, wants("a number"), secret, x)
		}
		v.SetFloat(f)
	case reflect.Slice:
		l, ok := x.([]any)
		if !ok {
			return d.wrong(key, wants("a list"), secret, x)
		}
		s := reflect.MakeSlice(t, len(l), len(l))
		for i, e := range l {
			if err := d.value(fmt.Sprintf("%s[%d]", key, i), "", secret, e, s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Map:
		m, ok := x.(map[string]any)
		if !ok {
			return d.wrong(key, wants("an object"), secret, x)
		}
		out := reflect.MakeMapWithSize(t, len(m))
		ks := make([]string, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			e := reflect.New(t.Elem()).Elem()
			if err := d.value(join(key, k), "", secret, m[k], e); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), e)
		}
		v.Set(out)
	case reflect.Struct:
		m, ok := x.(map[string]any)
		if !ok {
			return d.wrong(key, wants("an object"), secret, x)
		}
		return d.object(key, m, v)
	default:
		return fmt.Errorf("key %q: type %v is not supported", key, t)
	}
	return nil
}

// number is x as a float64 when it is a JSON number as DecodeJSON gives them (int64 or
// float64).
func number(x any) (float64, bool) {
	switch n := x.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// integer is x as an int64 when it is a number without a fraction.
func integer(x any) (int64, bool) {
	if n, ok := x.(int64); ok {
		return n, true
	}
	f, ok := number(x)
	if !ok || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// Kind names the JSON kind of x, a value as DecodeJSON gives them ("a string", "an object").
func Kind(x any) string {
	switch x.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	default:
		return "a number"
	}
}
