package swplugin

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/sdk/task"
)

func TestConfigure(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"max_instances": int64(0)}, `swedev config key "max_instances": want a positive integer, got 0`},
		{map[string]any{"slots": int64(-1)}, `swedev config key "slots": want a positive integer, got -1`},
		{map[string]any{"max_output_chars": 2.5}, `swedev config key "max_output_chars": want a positive integer, got 2.5`},
		{map[string]any{"lease_s": int64(0)}, `swedev config key "lease_s": want a positive number of seconds, got 0`},
		{map[string]any{"test_timeout_s": "long"}, `swedev config key "test_timeout_s": want a number of seconds, got "long"`},
		{map[string]any{"command_timeout_s": int64(601)}, `command_timeout_s and test_timeout_s are at most 600`},
		{map[string]any{"isolation": "chroot"}, `swedev config key "isolation": want bwrap, ns or rlimit, got "chroot"`},
		{map[string]any{"sandbox_url": "ftp://x"}, `swedev config key "sandbox_url": want an http:// or https:// URL, got "ftp://x"`},
		{map[string]any{"ro_binds": "/opt"}, `swedev config key "ro_binds": want a list of absolute paths, got "/opt"`},
		{map[string]any{"ro_binds": []any{"/opt", "rel"}}, `swedev config key "ro_binds"[1]: want an absolute path, got "rel"`},
		{map[string]any{"ro_binds": []any{int64(3)}}, `swedev config key "ro_binds[0]": want a string, got 3`},
		{map[string]any{"sandbox_token": int64(271828)}, `swedev config key "sandbox_token": want a string, got a number`},
	} {
		err := New().Configure(ctx, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, task.ErrInvalidArgument) {
			t.Errorf("Configure(%v) = %v, want %q", tc.cfg, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "271828") {
			t.Errorf("the token is in the error: %v", err)
		}
	}
	p := New()
	if err := p.Configure(ctx, map[string]any{"slots": int64(0), "lease_s": 60.5, "ro_binds": []any{"/opt"}, "isolation": "rlimit"}); err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Slots, want.Lease, want.ROBinds, want.Isolation = 0, 60500*time.Millisecond, []string{"/opt"}, "rlimit"
	if !reflect.DeepEqual(p.cfg, want) || p.ToolEnv.Lease != want.Lease {
		t.Errorf("config %+v (lease %v), want %+v", p.cfg, p.ToolEnv.Lease, want)
	}
	// An empty ro_binds is the default's: the sandbox is not started again.
	if err := p.Configure(ctx, map[string]any{"ro_binds": []any{}}); err != nil || p.cfg.ROBinds != nil {
		t.Errorf("empty ro_binds: %v, %#v", err, p.cfg.ROBinds)
	}
}
