// Command badtask is a small task plugin that misbehaves in the way its binary's name says
// (rlhost-task-MODE): the CLI's tests copy one build under each name and check that
// `rlhost train` ends every such run with an error naming the fault, and leaves no plugin
// process behind. Its rows (data_source badtask) run in the tool agent with the interaction
// feature (task.config.interaction=true), so every trajectory calls Start, Obs and End, and
// its End gives no reward, so every trajectory is scored by Score. Modes:
//
//	good           a correct plugin
//	hangstart      Start never answers; hangobs, Obs; hangscore, Score (whatever the deadline)
//	panic          Score panics (index out of range)
//	exitearly      the process exits right after printing its handshake line
//	exitmidrun     the process exits in every Start of step 2 and later
//	wronglen       Score returns one result fewer than it was given items
//	stdout         Score prints to stdout (the protocol's channel)
//	nan, posinf, neginf  Score's reward component "acc" is NaN, +Inf, -Inf
//	hangpreprocess Preprocess never answers (rlhost preprocess reads train.jsonl)
package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/rlhost/rlhost/sdk/task"
)

var mode = strings.TrimPrefix(filepath.Base(os.Args[0]), "rlhost-task-")

type badtask struct{ n atomic.Int64 }

func (b *badtask) Info(context.Context) (task.Info, error) {
	return task.Info{Name: mode, Version: "0.0.1", DataSources: []string{"badtask"}, DefaultAgentLoop: task.ToolAgent,
		Features: []string{task.FeatureInteraction}, DefaultInputs: []task.InputFile{{Split: "train", Name: "train.jsonl"}}}, nil
}

func (b *badtask) Preprocess(_ context.Context, r task.Record) (task.Row, error) {
	if mode == "hangpreprocess" {
		<-make(chan struct{})
	}
	q, _ := r.Data["q"].(string)
	return task.Row{DataSource: "badtask", AgentName: task.ToolAgent, Prompt: []task.Message{{Role: "user", Content: q}},
		RewardModel: task.RewardModel{Style: "rule", GroundTruth: "hi"}, ExtraInfo: map[string]any{"index": r.Index}}, nil
}

// Configure takes any config (interaction: true turns the user simulator on).
func (b *badtask) Configure(context.Context, map[string]any) error { return nil }

func (b *badtask) Start(_ context.Context, req task.StartRequest) (task.StartResult, error) {
	switch {
	case mode == "hangstart":
		<-make(chan struct{})
	case mode == "exitmidrun" && req.Step >= 2:
		task.Logger().Error("exiting on purpose", "step", req.Step, "trajectory", req.TrajectoryID)
		os.Exit(3)
	}
	return task.StartResult{InstanceID: fmt.Sprint(b.n.Add(1))}, nil
}

func (b *badtask) Obs(context.Context, task.ObsRequest) (task.ObsResult, error) {
	if mode == "hangobs" {
		<-make(chan struct{})
	}
	return task.ObsResult{Messages: []task.Message{{Role: "user", Content: "Thanks."}}, Done: true}, nil
}

func (b *badtask) End(context.Context, task.EndRequest) (task.EndResult, error) {
	return task.EndResult{}, nil
}

func (b *badtask) Score(_ context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	out := make([]task.ScoreResult, len(items))
	for i, it := range items {
		out[i] = task.ScoreResult{Score: float64(len(it.Solution) % 2), Components: map[string]float64{"acc": 1}}
	}
	switch mode {
	case "hangscore":
		<-make(chan struct{})
	case "panic":
		return grade(items), nil
	case "wronglen":
		return out[1:], nil
	case "stdout":
		fmt.Println("scoring", len(items), "items")
	case "nan", "posinf", "neginf":
		v := map[string]float64{"nan": math.NaN(), "posinf": math.Inf(1), "neginf": math.Inf(-1)}[mode]
		for i := range out {
			out[i].Components["acc"] = v
		}
	}
	return out, nil
}

// grade is Score's helper in mode panic: it indexes past the end of a slice.
func grade(items []task.ScoreItem) []task.ScoreResult {
	out := make([]task.ScoreResult, len(items))
	out[len(items)].Score = 1
	return out
}

func main() {
	if mode == "exitearly" {
		// Pass the handshake line on, then exit before serving a call.
		r, w, err := os.Pipe()
		if err != nil {
			panic(err)
		}
		stdout := os.Stdout
		os.Stdout = w
		go func() {
			line, _ := bufio.NewReader(r).ReadString('\n')
			stdout.WriteString(line)
			stdout.Sync()
			os.Exit(0)
		}()
	}
	task.Serve(&badtask{})
}
