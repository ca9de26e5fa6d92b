// Command badscore is the gsm8k task plugin with a scoring bug: every score it returns is NaN
// or +Inf (alternately), as a plugin that divides by zero would. The host scores such items 0,
// counts them in reward/errors and warns on the console; the CLI's tests check that it does.
package main

import (
	"context"
	"math"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/gsm8k/gsm8kplugin"
)

type badscore struct{ *gsm8kplugin.Task }

func (b badscore) Score(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	out, err := b.Task.Score(ctx, items)
	for i := range out {
		out[i].Score = math.NaN()
		if i%2 == 1 {
			out[i].Score = math.Inf(1)
		}
	}
	return out, err
}

func main() { task.Serve(badscore{gsm8kplugin.New()}) }
