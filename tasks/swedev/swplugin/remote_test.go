package swplugin

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/swedev/sandbox"
)

// The plugin with sandbox_url uses a remote rlhost-sandbox over HTTP the same way.
func TestRemoteSandbox(t *testing.T) {
	m, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer((&sandbox.Server{M: m, Token: "tok"}).Handler())
	defer srv.Close()
	p := New()
	defer p.Close()
	ctx := context.Background()
	if err := p.Configure(ctx, map[string]any{"sandbox_url": srv.URL, "sandbox_token": "tok"}); err != nil {
		t.Fatal(err)
	}
	row := sampleRow(t, p)
	st, err := p.Start(ctx, task.StartRequest{Row: row})
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 1 {
		t.Fatalf("%d remote instances", m.Len())
	}
	res := obs(t, p, st.InstanceID,
		call(EditorTool, map[string]any{"command": "str_replace", "path": "calc.py", "old_str": "a - b", "new_str": "a + b"}),
		call(EditorTool, map[string]any{"command": "view", "path": "../x"}),
		call(SubmitTool, map[string]any{}))
	if res.ToolResults[0].Error || !res.ToolResults[1].Error || !strings.Contains(res.ToolResults[1].Text, "outside the working tree") || !res.Done {
		t.Fatalf("%+v", res)
	}
	end, err := p.End(ctx, task.EndRequest{InstanceID: st.InstanceID})
	if err != nil || end.Reward != 1 {
		t.Fatalf("%+v %v", end, err)
	}
	if m.Len() != 0 {
		t.Fatalf("%d remote instances after End", m.Len())
	}
	if info, err := p.Info(ctx); err != nil || info.Has(task.FeatureWeakIsolation) != m.WeakIsolation() {
		t.Fatalf("Info through the remote sandbox (%s): %v %v", m.Isolation(), info.Features, err)
	}
	// A remote sandbox without a view: Info asks its /healthz and declares weak isolation.
	weak, err := sandbox.New(sandbox.Config{Isolation: "rlimit"})
	if err != nil {
		t.Fatal(err)
	}
	defer weak.Close()
	wsrv := httptest.NewServer((&sandbox.Server{M: weak, Token: "tok"}).Handler())
	defer wsrv.Close()
	wp := New()
	defer wp.Close()
	if err := wp.Configure(ctx, map[string]any{"sandbox_url": wsrv.URL, "sandbox_token": "tok"}); err != nil {
		t.Fatal(err)
	}
	if info, err := wp.Info(ctx); err != nil || !info.Has(task.FeatureWeakIsolation) {
		t.Fatalf("Info through a remote rlimit sandbox: %v %v", info.Features, err)
	}
	// A sandbox that is gone: Start fails with a message naming it.
	srv.Close()
	if _, err := p.Start(ctx, task.StartRequest{Row: row}); err == nil || !strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("Start with the sandbox down: %v", err)
	}
	if err := p.Configure(ctx, map[string]any{"sandbox_url": "ftp://x"}); err == nil {
		t.Fatal("ftp URL accepted")
	}
	if err := p.Configure(ctx, map[string]any{"sandbox_ulr": "http://x"}); err == nil || !strings.Contains(err.Error(), `did you mean "sandbox_url"`) {
		t.Fatalf("typo: %v", err)
	}
}
