// Package chatservertest serves the default model (SmolLM2-135M-Instruct, the GGUF that
// `make model` installs) behind rlhost's OpenAI-compatible chat server on 127.0.0.1, for the
// tests of what calls such an endpoint: LLM judges, external agent loops, task plugins.
package chatservertest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/rollout"
)

// Slots is the number of sequences the served policy decodes together.
const Slots = 4

// ModelPath returns the default model for a test: $RLHOST_MODEL when set, else
// models/SmolLM2-135M-Instruct.Q4_1.gguf in the checkout (the first folder above the test's
// own with a go.mod), else the default model where rlhost looks for it (config.DefaultModel:
// $RLHOST_HOME, the cache folder). When it is missing the test is skipped, or fails under CI,
// where `make test` has installed it.
func ModelPath(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("RLHOST_MODEL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			missing(tb, "the model in $RLHOST_MODEL is missing: "+err.Error()+" (make model)")
		}
		return p
	}
	if root := moduleRoot(); root != "" {
		p := filepath.Join(root, config.DefaultModelPath)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := config.DefaultModel()
	if err != nil {
		missing(tb, err.Error())
	}
	return p
}

func missing(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// moduleRoot is the first folder from the current one upward that holds a go.mod; "" if none.
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// Served is the default model behind a running chat server.
type Served struct {
	Server    *chatserver.Server   // listening on 127.0.0.1 (Server.URL)
	Tokenizer *tokenizer.Tokenizer // the model's tokenizer
	Model     *model.Model         // fp32 on the CPU backend
	Policy    *rollout.ModelPolicy // Slots sequences of at most opts.MaxContext tokens
}

// Serve loads the default model (ModelPath) on the CPU, serves it through a rollout.ModelPolicy
// with chatserver.New(policy, tokenizer, opts) and starts the server. opts.MaxContext (> 0) is
// also the policy's sequence length. The server, policy and tokenizer are closed when the test
// ends.
func Serve(tb testing.TB, opts chatserver.Options) *Served {
	tb.Helper()
	if opts.MaxContext <= 0 {
		tb.Fatalf("chatservertest.Serve: opts.MaxContext is %d; the policy needs a sequence length", opts.MaxContext)
	}
	m, tk := LoadDefault(tb)
	pol, err := rollout.NewModelPolicy(m, Slots, opts.MaxContext)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pol.Close)
	cs := chatserver.New(pol, tk, opts)
	if err := cs.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cs.Close() })
	return &Served{Server: cs, Tokenizer: tk, Model: m, Policy: pol}
}

// LoadDefault loads the default model (ModelPath) in fp32 on the CPU backend, with its
// tokenizer, which is closed when the test ends.
func LoadDefault(tb testing.TB) (*model.Model, *tokenizer.Tokenizer) {
	tb.Helper()
	path := ModelPath(tb)
	if err := cpu.EnsureCoreType(); err != nil {
		tb.Fatal(err)
	}
	tk, err := tokenizer.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tk.Close() })
	ck, err := weights.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := model.New(cpu.New(), ck)
	if err != nil {
		tb.Fatal(err)
	}
	return m, tk
}
