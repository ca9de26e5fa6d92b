package sft

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// TestParamDtypeConfig: model.fsdp_config.mixed_precision.param_dtype
// defaults to bfloat16 (rlhost train's default on CUDA), takes veRL's and
// rlhost's spellings, reads null as the default, keeps veRL's other
// fsdp_config keys without effect, and refuses anything else naming the key.
func TestParamDtypeConfig(t *testing.T) {
	pd := func(c *Config) string { return c.Model.FSDPConfig.MixedPrecision.ParamDtype }
	c, err := Load(nil, nil)
	if err != nil || pd(c) != "bfloat16" {
		t.Fatalf("default: %v, %v", c, err)
	}
	for _, v := range []string{"bfloat16", "bf16", "tf32", "float32", "fp32"} {
		c, err := Load(nil, []string{ParamDtypeKey + "=" + v})
		if err != nil || pd(c) != v {
			t.Errorf("%s=%s: %v", ParamDtypeKey, v, err)
		}
	}
	for _, null := range []string{"model.fsdp_config=null", "model.fsdp_config.mixed_precision=null", ParamDtypeKey + "=null"} {
		if c, err := Load(nil, []string{null}); err != nil || pd(c) != "bfloat16" {
			t.Errorf("%s: %v, param_dtype %q", null, err, pd(c))
		}
	}
	file := t.TempDir() + "/sft.yaml"
	if err := os.WriteFile(file, []byte("model:\n  fsdp_config:\n    model_dtype: fp32\n    wrap_policy:\n      min_num_params: 0\n    cpu_offload: false\n"+
		"    mixed_precision:\n      param_dtype: tf32\n      reduce_dtype: fp32\n      buffer_dtype: fp32\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = Load([]string{file}, nil)
	if err != nil || pd(c) != "tf32" || c.Model.FSDPConfig.Other["model_dtype"] != "fp32" {
		t.Fatalf("veRL fsdp_config: %v, %+v", err, c)
	}
	// The run's config.yaml loads back to the same keys.
	again := t.TempDir() + "/config.yaml"
	if err := c.WriteYAML(again); err != nil {
		t.Fatal(err)
	}
	if c2, err := Load([]string{again}, nil); err != nil || pd(c2) != "tf32" || c2.Model.FSDPConfig.Other["cpu_offload"] != false {
		t.Errorf("config.yaml round trip: %v, %+v", err, c2)
	}
	for _, bad := range []struct{ o, want string }{
		{ParamDtypeKey + "=fp16", ParamDtypeKey + `="fp16": want one of bfloat16, bf16, tf32, float32, fp32`},
		{ParamDtypeKey + "=int8", ParamDtypeKey},
		{"model.fsdp_config.mixed_precision.param_dtyp=bf16", "did you mean " + ParamDtypeKey},
	} {
		if _, err := Load(nil, []string{bad.o}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Load(%q) = %v, want an error with %q", bad.o, err, bad.want)
		}
	}
	if !strings.Contains(KeysMarkdown(), "| `"+ParamDtypeKey+"` | `bfloat16` |") || !strings.Contains(KeysMarkdown(), "`model.fsdp_config.*`") {
		t.Error("KeysMarkdown misses the fsdp_config keys")
	}
}

// TestOpenBackend: on trainer.device=cpu the precision key is not read and
// nothing is printed; cuda in a build without the tag is cuda.ErrNotBuilt,
// named as sft's trainer.device.
func TestOpenBackend(t *testing.T) {
	c, err := Load(nil, []string{ParamDtypeKey + "=tf32"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	be, err := openBackend(c, &out)
	if _, isCPU := be.(cpu.Backend); err != nil || !isCPU || out.Len() != 0 {
		t.Errorf("device=cpu: %v, %v; printed %q", be, err, out.String())
	}
	if cuda.Built {
		return
	}
	c.Trainer.Device = "cuda"
	if _, err := openBackend(c, &out); !errors.Is(err, cuda.ErrNotBuilt) || !strings.Contains(err.Error(), "sft: trainer.device=cuda") {
		t.Errorf("device=cuda without the tag: %v", err)
	}
}
