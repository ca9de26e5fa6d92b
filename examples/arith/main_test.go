package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rlhost/rlhost/sdk/conformance"
	"github.com/rlhost/rlhost/sdk/task"
)

func TestConformance(t *testing.T) {
	conformance.RunTask(t, Arith{&task.ToolEnv{Tools: []task.Tool{calculator{}}}})
}

func TestConformanceBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rlhost-task-arith")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	conformance.RunBinary(t, bin, conformance.Options{})
}

// TestColdStart: a record's cold-start trajectory calls the calculator with the record's
// operands, and the tool's reply for those arguments is the answer the trajectory ends with.
func TestColdStart(t *testing.T) {
	row, err := Arith{}.Preprocess(context.Background(), task.Record{Index: 3, Split: "train",
		Data: map[string]any{"a": int64(7), "b": int64(5), "op": "*"}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := row.ExtraInfo["sft_messages"].([]any)
	call := msgs[0].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	args, err := task.DecodeObject(call["arguments"].(string))
	if err != nil || call["name"] != "calculator" {
		t.Fatalf("call %v: %v", call, err)
	}
	out, err := calculator{}.Call(context.Background(), task.ToolInvocation{Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if out.Text != "35" || msgs[1].(map[string]any)["content"] != "35" || msgs[2].(map[string]any)["content"] != "35" {
		t.Errorf("tool reply %q, trajectory %v", out.Text, msgs)
	}
}
