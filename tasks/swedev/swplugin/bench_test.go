package swplugin

import (
	"context"
	"testing"

	"github.com/rlhost/rlhost/sdk/task"
)

// BenchmarkEvaluatePatch: the evaluation of End and Score on the sample row with its reference
// patch (a fresh instance, the patch, test_patch, the tests, delete).
func BenchmarkEvaluatePatch(b *testing.B) {
	p := New()
	defer p.Close()
	sb, err := p.sandbox()
	if err != nil {
		b.Fatal(err)
	}
	row, err := p.Preprocess(context.Background(), task.Record{Split: "train", Data: sampleRecord})
	if err != nil {
		b.Fatal(err)
	}
	spec, err := SpecOf(row.RewardModel.GroundTruth, row.ExtraInfo)
	if err != nil {
		b.Fatal(err)
	}
	patch := sampleRecord["patch"].(string)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev, err := EvaluatePatch(context.Background(), sb, patch, spec, DefaultConfig().TestWall)
		if err != nil || ev.Reward != 1 {
			b.Fatalf("%+v %v", ev, err)
		}
	}
}

// BenchmarkEvaluatePatchGo: the same for a Go row (rlhost__go-reverse): the runner placed in
// the instance, a generated test, one test binary.
func BenchmarkEvaluatePatchGo(b *testing.B) {
	p := New()
	defer p.Close()
	sb, err := p.sandbox()
	if err != nil {
		b.Fatal(err)
	}
	var rec task.Record
	for _, r := range datasetRecords(b) {
		if r.Data["instance_id"] == "rlhost__go-reverse" {
			rec = r
		}
	}
	row, err := p.Preprocess(context.Background(), rec)
	if err != nil {
		b.Fatal(err)
	}
	spec, err := SpecOf(row.RewardModel.GroundTruth, row.ExtraInfo)
	if err != nil {
		b.Fatal(err)
	}
	patch := rec.Data["patch"].(string)
	// One evaluation first: the Manager builds the runner on first use, once.
	if _, err := EvaluatePatch(context.Background(), sb, patch, spec, DefaultConfig().TestWall); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev, err := EvaluatePatch(context.Background(), sb, patch, spec, DefaultConfig().TestWall)
		if err != nil || ev.Reward != 1 {
			b.Fatalf("%+v %v", ev, err)
		}
	}
}
