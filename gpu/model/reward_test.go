package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/safetensors"
)

// rewardGolden is testdata/reward/scores.json (scripts/goldens/model/make_reward_goldens.py).
type rewardGolden struct {
	Sequences [][]int32            `json:"sequences"`
	Scores    map[string][]float64 `json:"scores"`
}

func loadRewardGolden(t *testing.T) rewardGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "reward", "scores.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g rewardGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRewardModelGolden scores the golden sequences with the tiny random reward models
// transformers wrote (Llama and Qwen2 sequence classifiers, a Qwen2 token classifier with a
// bias) and compares with transformers' scores, one sequence at a time and in padded
// micro-batches.
func TestRewardModelGolden(t *testing.T) {
	g := loadRewardGolden(t)
	if len(g.Scores) != 3 {
		t.Fatalf("scores.json has %d models, want 3", len(g.Scores))
	}
	for name, want := range g.Scores {
		t.Run(name, func(t *testing.T) {
			rm, err := LoadRewardModel(cpu.New(), filepath.Join("testdata", "reward", name))
			if err != nil {
				t.Fatal(err)
			}
			defer rm.Free()
			for _, micro := range []int{1, 3, len(g.Sequences)} {
				got, err := rm.Score(g.Sequences, micro)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if d := math.Abs(got[i] - want[i]); d > 1e-5 {
						t.Errorf("micro %d: sequence %d: score %.7f, transformers %.7f (|d| %.2g)", micro, i, got[i], want[i], d)
					}
				}
			}
		})
	}
}

// copyReward copies a golden reward model directory into a temporary one.
func copyReward(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("testdata", "reward", name, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// rewriteTensors rewrites dir/model.safetensors after edit changes its tensors.
func rewriteTensors(t *testing.T, dir string, edit func(ts []safetensors.Tensor) []safetensors.Tensor) {
	t.Helper()
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, ti := range f.Tensors {
		x, _, err := f.Float32s(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: ti.Name, Shape: ti.Shape, Data: append([]float32(nil), x...)})
	}
	f.Close()
	if err := safetensors.Write(path, edit(ts), safetensors.F32, nil); err != nil {
		t.Fatal(err)
	}
}

// TestRewardModelBadInput: each broken checkpoint gets an error naming the file and what is
// wrong with it.
func TestRewardModelBadInput(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(t *testing.T, dir string)
		want   []string // substrings of the error
	}{
		{"missing score.weight", func(t *testing.T, dir string) {
			rewriteTensors(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				out := ts[:0]
				for _, x := range ts {
					if x.Name != "score.weight" {
						out = append(out, x)
					}
				}
				return out
			})
		}, []string{"tensor score.weight is missing", "ForSequenceClassification"}},
		{"two labels in the head", func(t *testing.T, dir string) {
			rewriteTensors(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i, x := range ts {
					if x.Name == "score.weight" {
						ts[i] = safetensors.Tensor{Name: x.Name, Shape: []int{2, 16}, Data: append(x.Data, x.Data...)}
					}
				}
				return ts
			})
		}, []string{"model.safetensors", "tensor score.weight has shape [2 16], want [1 16]"}},
		{"num_labels 2 in config", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "config.json")
			b, _ := os.ReadFile(p)
			var m map[string]any
			json.Unmarshal(b, &m)
			m["id2label"] = map[string]string{"0": "LABEL_0", "1": "LABEL_1"}
			b, _ = json.Marshal(m)
			os.WriteFile(p, b, 0o644)
		}, []string{"config.json", "num_labels = 2"}},
		{"bias of two", func(t *testing.T, dir string) {
			rewriteTensors(t, dir, func(ts []safetensors.Tensor) []safetensors.Tensor {
				return append(ts, safetensors.Tensor{Name: "score.bias", Shape: []int{2}, Data: []float32{1, 2}})
			})
		}, []string{"model.safetensors", "tensor score.bias has shape [2], want [1]"}},
		{"a causal LM", func(t *testing.T, dir string) {
			for _, f := range []string{"config.json", "model.safetensors"} {
				b, err := os.ReadFile(filepath.Join("testdata", "tiny-llama", f))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, f), b, 0o644)
			}
		}, []string{"tensor score.weight is missing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyReward(t, "tiny-llama-seq")
			c.break_(t, dir)
			_, err := LoadRewardModel(cpu.New(), dir)
			if err == nil {
				t.Fatal("loaded a broken reward model")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the checkpoint %s", err, dir)
			}
		})
	}
}

// TestRewardModelBadSequence: sequences the model cannot score are errors naming the sequence.
func TestRewardModelBadSequence(t *testing.T) {
	rm, err := LoadRewardModel(cpu.New(), filepath.Join("testdata", "reward", "tiny-qwen2-seq"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		seqs [][]int32
		want string
	}{
		{[][]int32{{1, 2}, {}}, "sequence 1 is empty"},
		{[][]int32{{1, 64}}, "sequence 0 has token id 64 outside its vocabulary of 64"},
		{[][]int32{make([]int32, 65)}, "more than its max_position_embeddings 64"},
	} {
		if _, err := rm.Score(c.seqs, 2); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}
