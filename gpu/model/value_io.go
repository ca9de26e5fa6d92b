package model

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/rlhost/rlhost/gpu/safetensors"
	"github.com/rlhost/rlhost/gpu/weights"
)

// ValueHeadFile is the file beside a critic's decoder checkpoint that holds
// its head, under transformers' names score.weight [1,C] and score.bias [1].
const ValueHeadFile = "value_head.safetensors"

// Save writes the critic to dir: the decoder as a Hugging Face checkpoint
// (config.json + model.safetensors, what [weights.Load] and transformers
// read) and the head in [ValueHeadFile].
func (v *ValueModel) Save(dir string) error {
	if err := weights.Save(dir, v.Body.Params.Checkpoint(v.Body.HF)); err != nil {
		return err
	}
	C := v.Body.Config.C
	head := make([]float32, len(v.Head))
	v.Body.be.Download(head, v.Head)
	return safetensors.Write(filepath.Join(dir, ValueHeadFile), []safetensors.Tensor{
		{Name: "score.weight", Shape: []int{1, C}, Data: head[:C]},
		{Name: "score.bias", Shape: []int{1}, Data: head[C:]},
	}, safetensors.F32, map[string]string{"format": "pt"})
}

// Load restores a critic written by [ValueModel.Save] into v (same shapes).
func (v *ValueModel) Load(dir string) error {
	ck, err := weights.Load(dir)
	if err != nil {
		return err
	}
	if err := v.Body.Params.Load(ck); err != nil {
		return err
	}
	return v.LoadHead(filepath.Join(dir, ValueHeadFile))
}

// LoadHead reads the head from a [ValueHeadFile] (score.weight [1,C],
// score.bias [1]) into v.
func (v *ValueModel) LoadHead(path string) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("model: value head: %w", err)
	}
	defer f.Close()
	C := v.Body.Config.C
	for _, t := range []struct {
		name  string
		shape []int
		dst   []float32
	}{{"score.weight", []int{1, C}, v.Head[:C]}, {"score.bias", []int{1}, v.Head[C:]}} {
		x, info, err := f.Float32s(t.name)
		if err != nil {
			return fmt.Errorf("model: %s: tensor %s: %w", path, t.name, err)
		}
		if !slices.Equal(info.Shape, t.shape) {
			return fmt.Errorf("model: %s: tensor %s has shape %v, want %v", path, t.name, info.Shape, t.shape)
		}
		v.Body.be.Upload(t.dst, x)
	}
	if n := len(f.Tensors); n != 2 {
		return fmt.Errorf("model: %s: %d tensors, want score.weight and score.bias", path, n)
	}
	return nil
}
