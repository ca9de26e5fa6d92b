package trainer

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

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
