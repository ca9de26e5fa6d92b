package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Config holds the settings of tokenizer_config.json that this package uses:
// the special-token strings and the chat template.
type Config struct {
	BOS, EOS, Pad, Unk string
	ChatTemplate       string

	// spm: the tokenizer.json is FromGGUF's SentencePiece pipeline, in which a
	// NUL byte is an ordinary character (see encodeNULSPM).
	spm *spmPipeline
}

// readConfigDir reads dir/tokenizer_config.json (optional) and
// dir/chat_template.jinja (optional; it wins over the config's template, as
// in transformers).
func readConfigDir(dir string) (Config, error) {
	var cfg Config
	p := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return cfg, fmt.Errorf("tokenizer: %w", err)
	default:
		if cfg, err = ParseConfig(p, data); err != nil {
			return cfg, err
		}
	}
	jp := filepath.Join(dir, "chat_template.jinja")
	if tmpl, err := os.ReadFile(jp); err == nil {
		cfg.ChatTemplate = string(tmpl)
	} else if !errors.Is(err, os.ErrNotExist) {
		return cfg, fmt.Errorf("tokenizer: %w", err)
	}
	return cfg, nil
}

// ParseConfig parses the bytes of a tokenizer_config.json; name is used in errors.
func ParseConfig(name string, data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("%w: %s: not valid JSON: %v", ErrFormat, name, err)
	}
	var cfg Config
	for key, dst := range map[string]*string{"bos_token": &cfg.BOS, "eos_token": &cfg.EOS, "pad_token": &cfg.Pad, "unk_token": &cfg.Unk} {
		v, ok := raw[key]
		if !ok {
			continue
		}
		s, err := tokenString(v)
		if err != nil {
			return Config{}, fmt.Errorf("%w: %s: key %s: %v", ErrFormat, name, key, err)
		}
		*dst = s
	}
	if v, ok := raw["chat_template"]; ok {
		s, err := templateString(v)
		if err != nil {
			return Config{}, fmt.Errorf("%w: %s: key chat_template: %v", ErrFormat, name, err)
		}
		cfg.ChatTemplate = s
	}
	return cfg, nil
}

// tokenString reads a special token given as a string, null, or an
// AddedToken object {"content": ...}.
func tokenString(v json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(v, &s); err == nil {
		if s == nil {
			return "", nil
		}
		return *s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(v, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("want a string, null or {\"content\": ...}, got %.40s", v)
	}
	return *obj.Content, nil
}

// templateString reads chat_template given as a string or as a list of
// {"name", "template"} (the one named "default" is used).
func templateString(v json.RawMessage) (string, error) {
	var s *string
	if err := json.Unmarshal(v, &s); err == nil {
		if s == nil {
			return "", nil
		}
		return *s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(v, &list); err != nil {
		return "", fmt.Errorf("want a string or a list of {name, template}, got %.40s", v)
	}
	for _, t := range list {
		if t.Name == "default" {
			return t.Template, nil
		}
	}
	return "", fmt.Errorf("no template named \"default\" among %d", len(list))
}
