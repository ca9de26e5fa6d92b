package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxFileSize bounds a config file; real ones are a few kB.
const maxFileSize = 16 << 20

// Load builds a config from the defaults, then each file in order, then each
// override in order (key=value, +key=value; see Apply), fills
// trainer.mlflow_tracking_uri from MLFLOW_TRACKING_URI when it is null and
// trainer.experiment_name from task.name when it is empty, and validates the result.
func Load(files []string, overrides []string) (*Config, error) {
	c := Default()
	for _, f := range files {
		if err := c.LoadFile(f); err != nil {
			return nil, err
		}
	}
	for _, o := range overrides {
		if err := c.Apply(o); err != nil {
			return nil, err
		}
	}
	c.Trainer.ExperimentName = c.Experiment()
	if c.Trainer.MLflowTrackingURI == nil {
		if u := os.Getenv("MLFLOW_TRACKING_URI"); u != "" {
			c.Trainer.MLflowTrackingURI = &u
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadFile reads a YAML config file and sets the keys it holds over c.
func (c *Config) LoadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return &Error{File: path, Msg: fmt.Sprintf("larger than %d MiB; is this a config file?", maxFileSize>>20)}
	}
	return c.Parse(path, data)
}

// Parse sets the keys of the YAML document data over c; name is used in errors.
// An empty document changes nothing. Errors name the file, the line and the key.
func (c *Config) Parse(name string, data []byte) error {
	src := source{file: name}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return &Error{File: name, Msg: yamlError(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := 0
		if err == nil {
			line = extra.Line
		}
		return &Error{File: name, Line: line, Msg: "more than one YAML document (---): a config file holds one mapping"}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	// Apply to a copy so that a file with an error leaves c as it was.
	tmp := c.clone()
	if err := tmp.setNode("", doc.Content[0], src, 0); err != nil {
		return err
	}
	*c = *tmp
	return nil
}

// yamlError makes a yaml.v3 syntax error read as ours ("yaml: line 3: ..." -> "line 3: ...").
func yamlError(err error) string {
	return "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
}

// clone returns a deep copy of c.
func (c *Config) clone() *Config {
	d := *c
	d.Task.Config = deepCopyMap(c.Task.Config)
	d.Task.Configs = deepCopyMap(c.Task.Configs)
	d.Task.RewardWeights = deepCopyMap(c.Task.RewardWeights)
	d.Data.SamplingWeights = deepCopyMap(c.Data.SamplingWeights)
	d.RewardModel.RewardKwargs = deepCopyMap(c.RewardModel.RewardKwargs)
	d.RewardModel.RewardWeights = deepCopyMap(c.RewardModel.RewardWeights)
	d.compat = deepCopyMap(c.compat)
	d.compatSeen = append([]string(nil), c.compatSeen...)
	// Slices and pointers are shared: Set replaces them, never changes them in place.
	return &d
}

func deepCopyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return deepCopy(m).(map[string]any)
}
