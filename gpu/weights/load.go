package weights

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/rlhost/rlhost/gpu/safetensors"
)

// Load reads a checkpoint into fp32 tensors with Hugging Face names and shapes. path is either
// a Hugging Face directory (config.json plus model.safetensors or a sharded
// model.safetensors.index.json; F32, F16 or BF16), a .safetensors file with a config.json
// beside it, or a .gguf file (llama or qwen2 architecture; see [LoadGGUF]).
// The result is checked against its config ([Checkpoint.Check]).
func Load(path string) (*Checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	if st.IsDir() {
		return LoadHF(path)
	}
	if strings.HasSuffix(path, ".gguf") || hasMagic(path, "GGUF") {
		return LoadGGUF(path)
	}
	if strings.HasSuffix(path, ".safetensors") {
		return loadSafetensors(path, filepath.Join(filepath.Dir(path), "config.json"), func() (*safetensors.Set, error) {
			f, err := safetensors.Open(path)
			if err != nil {
				return nil, err
			}
			return safetensors.SetOf(filepath.Dir(path), f), nil
		})
	}
	return nil, fmt.Errorf("weights: %s: not a checkpoint directory, .gguf or .safetensors file", path)
}

func hasMagic(path, magic string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(magic))
	n, _ := f.Read(b)
	return bytes.Equal(b[:n], []byte(magic))
}

// LoadHF reads a Hugging Face checkpoint directory (config.json + safetensors).
func LoadHF(dir string) (*Checkpoint, error) {
	return loadSafetensors(dir, filepath.Join(dir, "config.json"), func() (*safetensors.Set, error) {
		return safetensors.OpenDir(dir)
	})
}

func loadSafetensors(source, configPath string, open func() (*safetensors.Set, error)) (*Checkpoint, error) {
	ck, err := readSafetensors(source, configPath, open)
	if err != nil {
		return nil, err
	}
	if err := ck.Check(); err != nil {
		return nil, err
	}
	return ck, nil
}

// readSafetensors reads a config and every tensor of a safetensors checkpoint, unchecked.
func readSafetensors(source, configPath string, open func() (*safetensors.Set, error)) (*Checkpoint, error) {
	cfg, err := readConfig(configPath)
	if err != nil {
		return nil, err
	}
	set, err := open()
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	defer set.Close()
	names := set.Names()
	ck := &Checkpoint{Config: cfg, Tensors: make(map[string]*Tensor, len(names)), Source: source}
	var mu sync.Mutex
	err = parallel(len(names), func(i int) error {
		name := names[i]
		if strings.HasSuffix(name, "rotary_emb.inv_freq") {
			return nil
		}
		data, ti, err := set.Float32s(name)
		if err != nil {
			return fmt.Errorf("weights: %w", err)
		}
		mu.Lock()
		ck.Tensors[name] = &Tensor{Shape: ti.Shape, Data: data}
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ck, nil
}

// parallel runs f(0..n-1) on up to GOMAXPROCS goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for i := range next {
				if first == nil {
					first = f(i)
				}
			}
			errs <- first
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
