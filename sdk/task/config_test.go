package task

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

type shaping struct {
	Penalty float64 `config:"penalty"`
	Bonus   float64 `config:"bonus"`
}

type limits struct {
	Max  int    `config:"max"`
	Name string `config:"name"`
}

// testConfig has a field of every kind DecodeConfig fills.
type testConfig struct {
	URL      string            `config:"url" want:"an http(s) URL"`
	Method   Method            `config:"method"`
	On       bool              `config:"on"`
	TopK     int               `config:"topk"`
	Small    int8              `config:"small"`
	Count    uint              `config:"count"`
	Score    float64           `config:"score"`
	Timeout  time.Duration     `config:"timeout_s"`
	Paths    []string          `config:"paths"`
	Env      map[string]string `config:"env"`
	Limits   limits            `config:"limits"`
	Opt      *limits           `config:"opt"`
	Raw      any               `config:"raw"`
	Token    string            `config:"token" secret:"true"`
	Shaping  shaping           `config:",inline"`
	internal int               // not a key
	Untagged string            // not a key
}

type Method string

func defaults() testConfig {
	return testConfig{URL: "http://127.0.0.1:1", Method: "strict", TopK: 3, Timeout: 5 * time.Second,
		Paths: []string{"/a"}, Limits: limits{Max: 10, Name: "n"}, Shaping: shaping{Bonus: 0.5}, internal: 7, Untagged: "u"}
}

func decode(t *testing.T, cfg map[string]any) (testConfig, error) {
	t.Helper()
	c := defaults()
	err := DecodeConfig("demo", cfg, &c)
	return c, err
}

func TestDecodeConfigSetsEveryKind(t *testing.T) {
	got, err := decode(t, map[string]any{
		"url": "https://x", "method": "flexible", "on": true, "topk": int64(5), "small": 3.0, "count": int64(2),
		"score": int64(1), "timeout_s": 0.25, "paths": []any{"/b", "/c"}, "env": map[string]any{"A": "1"},
		"limits": map[string]any{"max": int64(4)}, "opt": map[string]any{"name": "o"}, "raw": []any{int64(1), "x"},
		"penalty": -1.5,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := testConfig{URL: "https://x", Method: "flexible", On: true, TopK: 5, Small: 3, Count: 2, Score: 1,
		Timeout: 250 * time.Millisecond, Paths: []string{"/b", "/c"}, Env: map[string]string{"A": "1"},
		Limits: limits{Max: 4, Name: "n"}, Opt: &limits{Name: "o"}, Raw: []any{int64(1), "x"},
		Shaping: shaping{Penalty: -1.5, Bonus: 0.5}, internal: 7, Untagged: "u"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// A key the config leaves out keeps its default, at the top and in a nested object; an
// empty config, {} and null change nothing.
func TestDecodeConfigKeepsDefaults(t *testing.T) {
	got, err := decode(t, map[string]any{"limits": map[string]any{"name": "m"}})
	if err != nil {
		t.Fatal(err)
	}
	want := defaults()
	want.Limits.Name = "m"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, text := range []string{"", "{}", "null", " { } "} {
		m, err := DecodeObject(text)
		if err != nil {
			t.Fatalf("DecodeObject(%q): %v", text, err)
		}
		if got, err := decode(t, m); err != nil || !reflect.DeepEqual(got, defaults()) {
			t.Errorf("config %q: %+v, %v; want the defaults", text, got, err)
		}
	}
	if got, err := decode(t, nil); err != nil || !reflect.DeepEqual(got, defaults()) {
		t.Errorf("nil config: %+v, %v; want the defaults", got, err)
	}
	// null resets a pointer and an any, and is the wrong type elsewhere.
	c := defaults()
	c.Opt, c.Raw = &limits{}, 1
	if err := DecodeConfig("demo", map[string]any{"opt": nil, "raw": nil}, &c); err != nil || c.Opt != nil || c.Raw != nil {
		t.Errorf("null pointer and any: %+v, %v", c, err)
	}
}

func TestDecodeConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"tpok": int64(1)}, `demo config: unknown key "tpok" (known: url, method, on, topk, small, count, score, timeout_s, paths, env, limits, opt, raw, token, penalty, bonus); did you mean "topk"?`},
		{map[string]any{"zzzzzzzz": int64(1)}, `demo config: unknown key "zzzzzzzz" (known: url,`},
		{map[string]any{"bonsu": 1.0}, `did you mean "bonus"?`},
		{map[string]any{"limits": map[string]any{"mx": int64(1)}}, `demo config: unknown key "limits.mx" (known: limits.max, limits.name); did you mean "limits.max"?`},
		{map[string]any{"opt": map[string]any{"nam": "x"}}, `unknown key "opt.nam" (known: opt.max, opt.name); did you mean "opt.name"?`},
		{map[string]any{"url": 3.0}, `demo config key "url": want an http(s) URL, got 3`},
		{map[string]any{"method": nil}, `demo config key "method": want a string, got null`},
		{map[string]any{"on": "yes"}, `demo config key "on": want true or false, got "yes"`},
		{map[string]any{"topk": 2.5}, `demo config key "topk": want an integer, got 2.5`},
		{map[string]any{"topk": "3"}, `demo config key "topk": want an integer, got "3"`},
		{map[string]any{"topk": 1e30}, `demo config key "topk": want an integer, got 1e+30`},
		{map[string]any{"small": int64(300)}, `demo config key "small": want an integer, got 300`},
		{map[string]any{"count": int64(-1)}, `demo config key "count": want a non-negative integer, got -1`},
		{map[string]any{"score": true}, `demo config key "score": want a number, got true`},
		{map[string]any{"score": int(1)}, `demo config key "score": want a number, got 1`},
		{map[string]any{"timeout_s": "soon"}, `demo config key "timeout_s": want a number of seconds, got "soon"`},
		{map[string]any{"timeout_s": 1e12}, `demo config key "timeout_s": want a number of seconds, got 1000000000000`},
		{map[string]any{"paths": "/a"}, `demo config key "paths": want a list, got "/a"`},
		{map[string]any{"paths": []any{"/a", int64(2)}}, `demo config key "paths[1]": want a string, got 2`},
		{map[string]any{"env": []any{}}, `demo config key "env": want an object, got []`},
		{map[string]any{"env": map[string]any{"B": false}}, `demo config key "env.B": want a string, got false`},
		{map[string]any{"limits": "big"}, `demo config key "limits": want an object, got "big"`},
		{map[string]any{"limits": map[string]any{"max": "ten"}}, `demo config key "limits.max": want an integer, got "ten"`},
		{map[string]any{"opt": map[string]any{"max": 0.5}}, `demo config key "opt.max": want an integer, got 0.5`},
		{map[string]any{"url": strings.Repeat("x", 200) + "!"}, ""}, // a string is fine
		{map[string]any{"method": map[string]any{"k": strings.Repeat("y", 200)}}, `want a string, got {"k":"yyyyyyyy`},
		{map[string]any{"token": 123456789.5}, `demo config key "token": want a string, got a number`},
		{map[string]any{"Untagged": "x"}, `unknown key "Untagged"`},
		{map[string]any{"internal": int64(1)}, `unknown key "internal"`},
	} {
		_, err := decode(t, tc.cfg)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.cfg, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.cfg, err, tc.want)
			continue
		}
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%v: %v is not an InvalidArgument", tc.cfg, err)
		}
		if strings.Contains(err.Error(), "123456789") {
			t.Errorf("%v: a secret in the error: %v", tc.cfg, err)
		}
		if len(err.Error()) > 400 {
			t.Errorf("%v: error of %d bytes", tc.cfg, len(err.Error()))
		}
	}
	// Two bad keys: one error, the first key in sorted order.
	_, err := decode(t, map[string]any{"topk": "x", "on": "y", "zz": int64(1)})
	if err == nil || !strings.Contains(err.Error(), `key "on"`) || strings.Contains(err.Error(), "topk") {
		t.Errorf("two bad keys: %v", err)
	}
}

// A config struct DecodeConfig cannot fill is the plugin's mistake: an error that is not
// InvalidArgument, even when the config is empty.
func TestDecodeConfigBadStruct(t *testing.T) {
	type withChan struct {
		C chan int `config:"c"`
	}
	type intKeys struct {
		M map[int]string `config:"m"`
	}
	type twice struct {
		A int `config:"a"`
		B int `config:"a"`
	}
	type dotted struct {
		A int `config:"a.b"`
	}
	type badInline struct {
		A int `config:",inline"`
	}
	type unexported struct {
		a int `config:"a"`
	}
	var n int
	for _, dst := range []any{nil, testConfig{}, &n, (*testConfig)(nil), &withChan{}, &intKeys{}, &twice{}, &dotted{}, &badInline{}, &unexported{a: 1}} {
		err := DecodeConfig("demo", nil, dst)
		if err == nil || errors.Is(err, ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "task.DecodeConfig: ") {
			t.Errorf("%T: %v", dst, err)
		}
	}
}

// FuzzDecodeConfig feeds config_json as it comes off the wire through DecodeObject and
// DecodeConfig: no panic, and every outcome is either a config whose keys were all known or
// one InvalidArgument naming the plugin.
func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{``, `{}`, `null`, `{"topk": 4, "paths": ["/x"]}`, `{"limits": {"max": 1.0, "name": "a"}}`,
		`{"timeout_s": 1e308}`, `{"env": {"a": "b"}, "opt": null, "raw": {"x": [1, 2.5, null]}}`, `{"tpok": 1}`, `[1]`, `{"small": -129}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeObject(string(data))
		if err != nil {
			return
		}
		c := defaults()
		err = DecodeConfig("fuzz", m, &c)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "fuzz config") {
				t.Fatalf("%q: %v", data, err)
			}
			return
		}
		known := map[string]bool{}
		for _, k := range strings.Fields("url method on topk small count score timeout_s paths env limits opt raw token penalty bonus") {
			known[k] = true
		}
		for k := range m {
			if !known[k] {
				t.Fatalf("%q: unknown key %q accepted", data, k)
			}
		}
		if c.internal != 7 || c.Untagged != "u" {
			t.Fatalf("%q: untagged fields changed: %+v", data, c)
		}
	})
}
