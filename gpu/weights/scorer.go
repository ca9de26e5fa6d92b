package weights

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rlhost/rlhost/gpu/safetensors"
)

// ScoreHead is the one-label classification head of a Hugging Face
// XxxForSequenceClassification or XxxForTokenClassification checkpoint: a linear map from
// the decoder's last hidden state (after the final norm) to one number.
//
//	score = hidden . Weight + Bias
type ScoreHead struct {
	Weight []float32 // [C] score.weight, whose shape in the file is [1, C]
	Bias   float32   // score.bias (token classifiers have one); 0 when absent
	// HasBias reports whether the file had score.bias.
	HasBias bool
}

// LoadScorer reads a sequence-scoring checkpoint (a reward model): a Hugging Face directory
// (config.json + safetensors) or a .safetensors file with a config.json beside it, holding a
// Llama or Qwen2 decoder under model.* and a one-label head score.weight [1, C] (and, for
// token classifiers, score.bias [1]). It returns the decoder as a checkpoint (without an
// lm_head: it is marked tied, so [Checkpoint.Check] asks for none) and the head.
//
// A config with num_labels (or id2label) other than 1, a missing score.weight, or a head of
// another shape is an error naming the file and the tensor.
func LoadScorer(path string) (*Checkpoint, *ScoreHead, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("weights: %w", err)
	}
	var set *safetensors.Set
	var ck *Checkpoint
	configPath := filepath.Join(path, "config.json")
	switch {
	case st.IsDir():
		ck, err = readSafetensors(path, configPath, func() (*safetensors.Set, error) {
			set, err = safetensors.OpenDir(path)
			return set, err
		})
	case strings.HasSuffix(path, ".safetensors"):
		configPath = filepath.Join(filepath.Dir(path), "config.json")
		ck, err = readSafetensors(path, configPath, func() (*safetensors.Set, error) {
			f, err := safetensors.Open(path)
			if err != nil {
				return nil, err
			}
			set = safetensors.SetOf(filepath.Dir(path), f)
			return set, nil
		})
	default:
		return nil, nil, fmt.Errorf("weights: %s: a reward model is a Hugging Face directory or .safetensors file "+
			"(XxxForSequenceClassification / XxxForTokenClassification with one label)", path)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := checkNumLabels(configPath); err != nil {
		return nil, nil, err
	}
	fileOf := func(name string) string {
		if set != nil {
			if _, f, ok := set.Tensor(name); ok {
				return f.Name
			}
		}
		return path
	}
	C := ck.Config.HiddenSize
	w, ok := ck.Tensors["score.weight"]
	if !ok {
		return nil, nil, fmt.Errorf("weights: %s: tensor score.weight is missing: a reward model is a "+
			"XxxForSequenceClassification or XxxForTokenClassification checkpoint with one label (a causal LM has none)", path)
	}
	if !equalInts(w.Shape, []int{1, C}) || len(w.Data) != C {
		return nil, nil, fmt.Errorf("weights: %s: tensor score.weight has shape %v, want [1 %d] (one label over hidden_size %d)",
			fileOf("score.weight"), w.Shape, C, C)
	}
	head := &ScoreHead{Weight: w.Data}
	if b, ok := ck.Tensors["score.bias"]; ok {
		if !equalInts(b.Shape, []int{1}) || len(b.Data) != 1 {
			return nil, nil, fmt.Errorf("weights: %s: tensor score.bias has shape %v, want [1] (one label)", fileOf("score.bias"), b.Shape)
		}
		head.Bias, head.HasBias = b.Data[0], true
	}
	delete(ck.Tensors, "score.weight")
	delete(ck.Tensors, "score.bias")
	if _, ok := ck.Tensors["lm_head.weight"]; !ok {
		ck.Config.TieWordEmbeddings = true // a classifier has no lm_head; none is needed
	}
	if err := ck.Check(); err != nil {
		return nil, nil, err
	}
	return ck, head, nil
}

// checkNumLabels rejects a config whose num_labels or id2label says other than one label.
// A config with neither is accepted (the head's shape decides).
func checkNumLabels(configPath string) error {
	b, err := os.ReadFile(configPath)
	if err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	var c struct {
		NumLabels *int           `json:"num_labels"`
		ID2Label  map[string]any `json:"id2label"`
		Arch      []string       `json:"architectures"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("weights: %s: %w", configPath, err)
	}
	n := -1
	if c.NumLabels != nil {
		n = *c.NumLabels
	} else if c.ID2Label != nil {
		n = len(c.ID2Label)
	}
	if n != -1 && n != 1 {
		return fmt.Errorf("weights: %s: num_labels = %d (architectures %v): a reward model scores with one label; "+
			"save it with num_labels=1", configPath, n, c.Arch)
	}
	return nil
}
