package trace

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The rules are task.DecodeConfig's (tested there); here, the trace SDK's error kind.
func TestDecodeConfig(t *testing.T) {
	type config struct {
		URI     string        `config:"uri"`
		Timeout time.Duration `config:"timeout_seconds"`
	}
	c := config{URI: "http://x", Timeout: time.Second}
	if err := DecodeConfig("demo", map[string]any{"timeout_seconds": int64(3)}, &c); err != nil || c != (config{"http://x", 3 * time.Second}) {
		t.Errorf("%+v, %v", c, err)
	}
	for msg, cfg := range map[string]map[string]any{
		`demo config: unknown key "ur" (known: uri, timeout_seconds); did you mean "uri"?`: {"ur": "x"},
		`demo config key "uri": want a string, got 3`:                                      {"uri": int64(3)},
	} {
		err := DecodeConfig("demo", cfg, &c)
		if err == nil || !strings.Contains(err.Error(), msg) || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%v: %v, want an invalid argument %q", cfg, err, msg)
		}
	}
	var n int
	if err := DecodeConfig("demo", nil, &n); err == nil || errors.Is(err, ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "trace.DecodeConfig: ") {
		t.Errorf("a dst that is not a struct: %v", err)
	}
}
