package trainer

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// sampler walks the training examples in epochs, shuffled with a seed per epoch, in batches
// of a fixed size (an incomplete last batch is dropped, as veRL's dataloader does).
//
// With data.sampling_weights each prompt of a batch comes from a data_source drawn with
// probability weight/sum (a generator seeded by the batch number), and walks that source's
// rows in its own shuffled epochs. Epoch and Pos then count batches as the plain sampler
// would (StepsPerEpoch batches an epoch), so checkpoints store the same two numbers and
// Seek replays the draws up to them.
type sampler struct {
	n, batch, seed int
	shuffle        bool
	Epoch, Pos     int // the next batch starts at Pos of epoch Epoch's order
	order          []int

	w *weighted // nil: uniform over all rows
}

// weighted is the state of data.sampling_weights sampling.
type weighted struct {
	names    []string  // data sources with a positive weight, sorted
	cum      []float64 // cumulative weights over names
	rows     [][]int   // example indexes per source
	order    [][]int   // the current epoch's order per source
	pos      []int     // next position in order per source
	epoch    []int     // epochs walked per source
	drawn    int       // batches drawn so far
	perEpoch int
}

// newSamplerFor is newSampler over examples, weighted by data_source when weights is set:
// every data_source of the examples needs a weight, and every weight a data_source.
func newSamplerFor(exs []example, batch, seed int, shuffle bool, weights map[string]float64) (*sampler, error) {
	s := newSampler(len(exs), batch, seed, shuffle)
	if len(weights) == 0 {
		return s, nil
	}
	bySource := map[string][]int{}
	for i, e := range exs {
		bySource[e.Row.DataSource] = append(bySource[e.Row.DataSource], i)
	}
	var missing, unused []string
	for _, ds := range sortedNames(bySource) {
		if _, ok := weights[ds]; !ok {
			missing = append(missing, ds)
		}
	}
	for _, ds := range sortedNames(weights) {
		if _, ok := bySource[ds]; !ok {
			unused = append(unused, ds)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("trainer: data.sampling_weights has no weight for data_source %s of data.train_files: give each a weight (0 leaves it out)",
			strings.Join(quoteAll(missing), ", "))
	}
	if len(unused) > 0 {
		return nil, fmt.Errorf("trainer: data.sampling_weights names data_source %s, which no usable row of data.train_files has (sources: %s)",
			strings.Join(quoteAll(unused), ", "), strings.Join(quoteAll(sortedNames(bySource)), ", "))
	}
	w := &weighted{perEpoch: max(s.StepsPerEpoch(), 1)}
	total := 0.0
	for _, ds := range sortedNames(weights) {
		if weights[ds] <= 0 {
			continue
		}
		total += weights[ds]
		w.names = append(w.names, ds)
		w.cum = append(w.cum, total)
		w.rows = append(w.rows, bySource[ds])
	}
	s.w = w
	s.resetWeighted()
	return s, nil
}

func quoteAll(xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

func (s *sampler) resetWeighted() {
	w := s.w
	w.drawn = 0
	w.order = make([][]int, len(w.names))
	w.pos = make([]int, len(w.names))
	w.epoch = make([]int, len(w.names))
	for k := range w.names {
		s.reorderSource(k)
	}
}

func (s *sampler) reorderSource(k int) {
	w := s.w
	w.order[k] = append([]int(nil), w.rows[k]...)
	w.pos[k] = 0
	if s.shuffle {
		r := rand.New(rand.NewPCG(uint64(s.seed), uint64(1<<32)+uint64(k)<<16+uint64(w.epoch[k])))
		r.Shuffle(len(w.order[k]), func(i, j int) { w.order[k][i], w.order[k][j] = w.order[k][j], w.order[k][i] })
	}
}

func (s *sampler) nextWeighted() []int {
	w := s.w
	r := rand.New(rand.NewPCG(uint64(s.seed)^0x9e3779b97f4a7c15, uint64(w.drawn)))
	total := w.cum[len(w.cum)-1]
	b := make([]int, s.batch)
	for i := range b {
		x := r.Float64() * total
		k := 0
		for k < len(w.cum)-1 && x >= w.cum[k] {
			k++
		}
		if w.pos[k] == len(w.order[k]) {
			w.epoch[k]++
			s.reorderSource(k)
		}
		b[i] = w.order[k][w.pos[k]]
		w.pos[k]++
	}
	w.drawn++
	s.Epoch, s.Pos = w.drawn/w.perEpoch, (w.drawn%w.perEpoch)*s.batch
	return b
}

func newSampler(n, batch, seed int, shuffle bool) *sampler {
	s := &sampler{n: n, batch: batch, seed: seed, shuffle: shuffle}
	s.reorder()
	return s
}

func (s *sampler) reorder() {
	s.order = make([]int, s.n)
	for i := range s.order {
		s.order[i] = i
	}
	if s.shuffle {
		r := rand.New(rand.NewPCG(uint64(s.seed), uint64(s.Epoch)))
		r.Shuffle(len(s.order), func(i, j int) { s.order[i], s.order[j] = s.order[j], s.order[i] })
	}
}

// StepsPerEpoch is the number of full batches in an epoch.
func (s *sampler) StepsPerEpoch() int { return s.n / s.batch }

// Next returns the indexes of the next batch, moving to the next epoch when needed.
func (s *sampler) Next() []int {
	if s.w != nil {
		return s.nextWeighted()
	}
	if s.Pos+s.batch > s.n {
		s.Epoch++
		s.Pos = 0
		s.reorder()
	}
	b := append([]int(nil), s.order[s.Pos:s.Pos+s.batch]...)
	s.Pos += s.batch
	return b
}

// Seek puts the sampler at a saved position.
func (s *sampler) Seek(epoch, pos int) {
	if s.w != nil {
		s.resetWeighted()
		s.Epoch, s.Pos = 0, 0
		for n := epoch*s.w.perEpoch + pos/s.batch; n > 0; n-- {
			s.nextWeighted()
		}
		return
	}
	s.Epoch, s.Pos = epoch, pos
	s.reorder()
}
