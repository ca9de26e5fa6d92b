package trainer

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/progress"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// example is one usable dataset row with its prompt (from the task plugin) and the prompt's
// token count.
type example struct {
	Row         task.Row
	Prompt      task.Prompt
	PromptIDs   []int // the rendered prompt, truncated if data.truncation says so
	PromptLen   int   // before truncation
	SampleIndex int64
	task        *runTask // the task that serves Row.DataSource
}

func taskRow(r data.Row) task.Row {
	out := task.Row{DataSource: r.DataSource, Ability: r.Ability, ExtraInfo: r.ExtraInfo, AgentName: r.AgentName,
		RewardModel: task.RewardModel{Style: r.RewardModel.Style, GroundTruth: r.RewardModel.GroundTruth}}
	for _, m := range r.Prompt {
		out.Prompt = append(out.Prompt, task.Message{Role: m.Role, Content: m.Content})
	}
	return out
}

// loadExamples reads the parquet files of key (globs expanded), routes each row to the task
// that serves its data_source (a row no task serves fails here, before any step, naming file,
// row and the loaded tasks), asks that task for the row's prompt, tokenises it with the chat
// template, and drops (filterOverlong) or rejects (truncation=error) prompts longer than
// maxPrompt. limit > 0 keeps only the first limit usable rows.
func loadExamples(ctx context.Context, key string, patterns []string, chat rollout.Chat, tasks *taskSet,
	defaultLoop string, maxPrompt int, filterOverlong bool, truncation string, limit int, bar *progress.Bar) ([]example, int, error) {
	files, err := data.ExpandFiles(key, patterns)
	if err != nil {
		return nil, 0, err
	}
	var rows []task.Row
	var where []string
	var owners []*runTask
	for _, f := range files {
		rs, err := data.ReadParquet(f)
		if err != nil {
			return nil, 0, err
		}
		for i, r := range rs {
			if err := data.CheckRow(r); err != nil {
				return nil, 0, fmt.Errorf("trainer: %s: %s row %d: %v (rlhost preprocess skips such rows)",
					key, f, i, strings.TrimPrefix(err.Error(), "data: "))
			}
			rt, ok := tasks.route(r.DataSource)
			if !ok {
				return nil, 0, fmt.Errorf("trainer: %s: %s row %d: data_source %q is served by none of the loaded tasks: %s "+
					"(add the task that serves it to task.name / --task, or remove such rows)", key, f, i, r.DataSource, tasks.describe())
			}
			rows = append(rows, taskRow(r))
			where = append(where, fmt.Sprintf("%s row %d", f, i))
			owners = append(owners, rt)
		}
	}
	if len(rows) == 0 {
		return nil, 0, fmt.Errorf("trainer: no rows in %v", files)
	}
	if limit > 0 && limit < len(rows) {
		// Prompts are only needed for the rows kept; take a margin for filtered ones. In a
		// mixed run the limit is per task, so that every task is validated.
		keep := map[*runTask]int{}
		var r2 []task.Row
		var w2 []string
		var o2 []*runTask
		for i := range rows {
			k := owners[i]
			if !tasks.mixed() {
				k = nil
			}
			if keep[k] < limit*2+8 {
				keep[k]++
				r2, w2, o2 = append(r2, rows[i]), append(w2, where[i]), append(o2, owners[i])
			}
		}
		rows, where, owners = r2, w2, o2
	}
	if bar != nil {
		bar.SetTotal(int64(len(rows)))
	}
	exs := make([]example, len(rows))
	errs := make([]error, len(rows))
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				r := rows[i]
				p, err := owners[i].p.Prompt(ctx, r)
				if err != nil {
					if tasks.mixed() {
						err = fmt.Errorf("task %s: %w", owners[i].name, err)
					}
					errs[i] = fmt.Errorf("%s: Prompt: %w", where[i], err)
					continue
				}
				loop := r.AgentName
				if loop == "" {
					loop = defaultLoop
				}
				ids, err := chat.EncodePrompt(loop, p)
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", where[i], err)
					continue
				}
				idx := r.Index()
				if idx < 0 {
					idx = int64(i)
				}
				exs[i] = example{Row: r, Prompt: p, PromptIDs: ids, PromptLen: len(ids), SampleIndex: idx, task: owners[i]}
				if bar != nil {
					bar.Add(1)
				}
			}
		}()
	}
	for i := range rows {
		work <- i
	}
	close(work)
	wg.Wait()
	if bar != nil {
		bar.Finish()
	}
	var out []example
	filtered := 0
	kept := map[*runTask]int{}
	for i, e := range exs {
		k := owners[i]
		if !tasks.mixed() {
			k = nil
		}
		if limit > 0 && kept[k] == limit {
			continue // this task has its rows
		}
		if errs[i] != nil {
			return nil, 0, errs[i]
		}
		if e.PromptLen > maxPrompt {
			if filterOverlong {
				filtered++
				continue
			}
			if truncation == "error" {
				return nil, 0, fmt.Errorf("trainer: %s: prompt is %d tokens, longer than data.max_prompt_length=%d "+
					"(set data.filter_overlong_prompts=true to drop such rows, or data.truncation=left|right|middle)",
					where[i], e.PromptLen, maxPrompt)
			}
			e.PromptIDs = truncatePrompt(e.PromptIDs, maxPrompt, truncation)
		}
		kept[k]++
		out = append(out, e)
	}
	return out, filtered, nil
}

// truncatePrompt cuts prompt ids to n tokens as data.truncation says.
func truncatePrompt(ids []int, n int, side string) []int {
	if len(ids) <= n {
		return ids
	}
	switch side {
	case "left":
		return ids[len(ids)-n:]
	case "right":
		return ids[:n]
	default: // middle
		h := n / 2
		return append(append([]int(nil), ids[:h]...), ids[len(ids)-(n-h):]...)
	}
}

// loadTrainData loads the training examples of data.train_files (none with trainer.val_only):
// their prompts from the task plugins, the overlong ones dropped or cut (data.truncation); the
// sampler over them, and the run's steps (trainer.total_training_steps, else steps per epoch
// times trainer.total_epochs).
func (t *Trainer) loadTrainData(ctx context.Context, _ *opening) error {
	cfg, d := t.cfg, t.cfg.Data
	if cfg.Trainer.ValOnly {
		return nil
	}
	bar := progress.New(t.opts.Progress, "prompts (train)", 0, "rows")
	bar.Waiting(t.tasks.waitingOn)
	train, filtered, err := loadExamples(ctx, "data.train_files", d.TrainFiles, t.render, t.tasks, cfg.ActorRolloutRef.Rollout.Agent.DefaultAgentLoop,
		cfg.PromptLength(), d.FilterOverlongPrompts, d.Truncation, 0, bar)
	t.train = train
	if err != nil {
		return err
	}
	if filtered > 0 {
		t.log.Info("dropped overlong training prompts", "rows", filtered, "max_prompt_length", cfg.PromptLength())
	}
	if len(t.train) < d.TrainBatchSize {
		return fmt.Errorf("trainer: %d usable training rows, fewer than data.train_batch_size=%d", len(t.train), d.TrainBatchSize)
	}
	if t.sampler, err = newSamplerFor(t.train, d.TrainBatchSize, d.Seed, d.Shuffle, cfg.SamplingWeights()); err != nil {
		return err
	}
	t.totalSteps = t.sampler.StepsPerEpoch() * cfg.Trainer.TotalEpochs
	if cfg.Trainer.TotalTrainingSteps != nil {
		t.totalSteps = *cfg.Trainer.TotalTrainingSteps
	}
	return nil
}

// loadValData loads the first data.val_max_samples usable validation examples of
// data.val_files, overlong prompts dropped.
func (t *Trainer) loadValData(ctx context.Context, _ *opening) error {
	cfg, d := t.cfg, t.cfg.Data
	if len(d.ValFiles) == 0 {
		return nil
	}
	limit := 0
	if d.ValMaxSamples != nil {
		limit = *d.ValMaxSamples
	}
	var err error
	t.val, _, err = loadExamples(ctx, "data.val_files", d.ValFiles, t.render, t.tasks, cfg.ActorRolloutRef.Rollout.Agent.DefaultAgentLoop,
		cfg.PromptLength(), true, d.Truncation, limit, nil)
	return err
}

// warnDroppedTools prints, once per run, the tool-call format (formatLine; "" prints none) and a
// warning when the chat template does not show the model the tools of the first tool_agent
// prompt that has tools (tools vanish in silence otherwise: the schemas are dropped, the run
// goes on).
func (t *Trainer) warnDroppedTools(w io.Writer, mpath, defLoop, formatLine string) error {
	for _, set := range [][]example{t.train, t.val} {
		for _, e := range set {
			loop := e.Row.AgentName
			if loop == "" {
				loop = defLoop
			}
			if loop != rollout.ToolAgent || len(e.Prompt.Tools) == 0 {
				continue
			}
			if formatLine != "" {
				fmt.Fprintln(w, formatLine)
			}
			ok, err := t.render.ToolsRendered(e.Prompt.Messages, e.Prompt.Tools)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintln(w, t.render.DroppedToolsWarning(mpath, "task "+e.task.name, e.Prompt.Tools))
			}
			return nil
		}
	}
	return nil
}
