package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/gsm8k/gsm8kplugin"
)

// The plugin round trip: the same gsm8k implementation called in-process and through its
// plugin process (gRPC over a Unix socket with mTLS), with the default deadline on each call
// as in a run, and without one (NoDeadline: what the deadlines cost). Each benchmark reports
// p50 and p99 of the per-call latency in microseconds.

func gsm8kBinary(b *testing.B) Binary {
	t := &testing.T{}
	p := build(t, ".", "./tasks/gsm8k/cmd/rlhost-task-gsm8k", "gsm8k", "")
	if t.Failed() {
		b.Fatal("building rlhost-task-gsm8k failed")
	}
	return Binary{Kind: "task", Name: "gsm8k", Path: p}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.50), "p50-us")
	b.ReportMetric(q(0.99), "p99-us")
}

type env interface {
	task.Environment
	task.Task
}

func sampleRow(b *testing.B, t env) task.Row {
	info, err := t.Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	row, err := t.(interface {
		Preprocess(context.Context, task.Record) (task.Row, error)
	}).Preprocess(context.Background(), task.Record{Split: "train", Data: info.Samples[0].Record})
	if err != nil {
		b.Fatal(err)
	}
	return row
}

func benchObs(b *testing.B, t env) {
	ctx := context.Background()
	row := sampleRow(b, t)
	st, err := t.Start(ctx, task.StartRequest{Row: row})
	if err != nil {
		b.Fatal(err)
	}
	req := task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools, Turn: 1, Assistant: task.Message{Role: "assistant",
		ToolCalls: []task.ToolCall{{ID: "c", Name: "calc_gsm8k_reward", Arguments: json.RawMessage(`{"answer":"72"}`)}}}}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		if _, err := t.Obs(ctx, req); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(s))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func benchScore(b *testing.B, t env, n int) {
	ctx := context.Background()
	items := make([]task.ScoreItem, n)
	for i := range items {
		items[i] = task.ScoreItem{DataSource: "openai/gsm8k", Solution: fmt.Sprintf("step by step ... #### %d", i%100), GroundTruth: "72"}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		if _, err := t.Score(ctx, items); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(s))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// openGSM8K starts the gsm8k plugin with the default deadlines (DefaultTimeouts), as a run
// does; noDeadline starts it with none, to measure what the deadlines cost.
func openGSM8K(b *testing.B, noDeadline ...bool) *Task {
	var to Timeouts
	if len(noDeadline) > 0 && noDeadline[0] {
		to = Timeouts{Obs: -1, Score: -1}
	}
	tk, err := OpenTaskBinaryWith(context.Background(), gsm8kBinary(b), nil, Options{}, TaskOptions{Timeouts: to})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(tk.Close)
	return tk
}

func BenchmarkObsInProcess(b *testing.B)        { benchObs(b, gsm8kplugin.New()) }
func BenchmarkObsPlugin(b *testing.B)           { benchObs(b, openGSM8K(b)) }
func BenchmarkObsPluginNoDeadline(b *testing.B) { benchObs(b, openGSM8K(b, true)) }

func BenchmarkScore1InProcess(b *testing.B)        { benchScore(b, gsm8kplugin.New(), 1) }
func BenchmarkScore1Plugin(b *testing.B)           { benchScore(b, openGSM8K(b), 1) }
func BenchmarkScore1PluginNoDeadline(b *testing.B) { benchScore(b, openGSM8K(b, true), 1) }
func BenchmarkScore256InProcess(b *testing.B)      { benchScore(b, gsm8kplugin.New(), 256) }
func BenchmarkScore256Plugin(b *testing.B)         { benchScore(b, openGSM8K(b), 256) }

// What a call's deadline and bookkeeping cost on the host, without the round trip: the same
// empty call made through CallWithin (deadline, pending list) and through Call (neither).
func BenchmarkCallBookkeeping(b *testing.B) {
	tk := openGSM8K(b)
	ctx := context.Background()
	nop := func(context.Context, *Process) error { return nil }
	b.Run("CallWithin", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := tk.sup.CallWithin(ctx, "Obs", "trajectory s1-0-1", 10*time.Minute, "task.timeouts.obs", nop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Call", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := tk.sup.Call(ctx, "Obs", func(*Process) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
