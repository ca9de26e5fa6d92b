package chatserver

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/rollout"
)

func modelServer(t *testing.T) (*Server, *rollout.ModelPolicy) {
	tk := smolTokenizer(t)
	p := os.Getenv("RLHOST_MODEL")
	if p == "" {
		p = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	ck, err := weights.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cpu.New(), ck)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := rollout.NewModelPolicy(m, 2, 512)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pol.Close)
	s := New(pol, tk, Options{MaxContext: 512})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, pol
}

// The alternatives are those of the distribution the sampled token's log-prob refers to: the
// sampled token, when listed, has the log-prob the generator gave it; otherwise it is less
// likely than every listed one; greedy picks the first.
func TestTopLogprobs(t *testing.T) {
	s, pol := modelServer(t)
	prompt := s.tk.Encode("<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n", false)
	ctx := context.Background()
	for _, temp := range []float64{0, 1, 0.7} {
		g, err := pol.Generate(ctx, prompt, rollout.SamplingParams{MaxTokens: 12, Temperature: temp, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		tops, err := pol.TopLogprobs(ctx, prompt, g.Tokens, 5, temp)
		if err != nil {
			t.Fatal(err)
		}
		listed := 0
		for j, tok := range g.Tokens {
			top := tops[j]
			if len(top) != 5 {
				t.Fatalf("temperature %v token %d: %d alternatives", temp, j, len(top))
			}
			for q := 1; q < len(top); q++ {
				if top[q].Logprob > top[q-1].Logprob {
					t.Fatalf("temperature %v token %d: not sorted: %v", temp, j, top)
				}
			}
			found := false
			for _, a := range top {
				if a.ID == tok {
					found = true
					listed++
					if math.Abs(float64(a.Logprob-g.Logprobs[j])) > 1e-3 {
						t.Errorf("temperature %v token %d: listed log-prob %v, generator %v", temp, j, a.Logprob, g.Logprobs[j])
					}
				}
			}
			if !found && g.Logprobs[j] > top[4].Logprob+1e-3 {
				t.Errorf("temperature %v token %d (log-prob %v) is missing but beats the 5th (%v)", temp, j, g.Logprobs[j], top[4].Logprob)
			}
			if temp == 0 && top[0].ID != tok {
				t.Errorf("greedy token %d is %d, the first alternative %d", j, tok, top[0].ID)
			}
		}
		if listed == 0 {
			t.Errorf("temperature %v: no sampled token among the alternatives", temp)
		}
	}
}

func TestTopLogprobsEndpoint(t *testing.T) {
	s, _ := modelServer(t)
	sess, _ := s.Open("traj-0", rollout.SamplingParams{MaxTokens: 10, Seed: 2})
	url := sess.BaseURL() + "/chat/completions"
	st, m := post(t, url, "", `{"messages": [{"role": "user", "content": "Say hi."}], "temperature": 0, "logprobs": true, "top_logprobs": 3}`)
	if st != 200 {
		t.Fatalf("status %d: %v", st, m)
	}
	content := m["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)["content"].([]any)
	for j, e := range content {
		e := e.(map[string]any)
		top := e["top_logprobs"].([]any)
		if len(top) != 3 {
			t.Fatalf("token %d: %d alternatives", j, len(top))
		}
		first := top[0].(map[string]any)
		if first["token"] != e["token"] || math.Abs(first["logprob"].(float64)-e["logprob"].(float64)) > 1e-3 {
			t.Errorf("greedy token %d: %v, first alternative %v", j, e, first)
		}
	}
	for _, tc := range []struct{ body, msg string }{
		{`{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}`, "top_logprobs needs logprobs: true"},
		{`{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21}`, "top_logprobs must be in [0, 20]"},
	} {
		st, m := post(t, url, "", tc.body)
		if e, _ := m["error"].(map[string]any); st != 400 || !strings.Contains(e["message"].(string), tc.msg) {
			t.Errorf("%s: %d %v", tc.body, st, m)
		}
	}
	// A policy that cannot list alternatives says so.
	sc, _ := newServer(t, "hi")
	ss, _ := sc.Open("traj-0", rollout.SamplingParams{MaxTokens: 10})
	st, m = post(t, ss.BaseURL()+"/chat/completions", "", `{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 2}`)
	if e, _ := m["error"].(map[string]any); st != 400 || !strings.Contains(e["message"].(string), "top_logprobs is not available") {
		t.Errorf("scripted policy: %d %v", st, m)
	}
	// The official openai client, streaming, with top_logprobs.
	py := os.Getenv("RLHOST_GENCHAT_PYTHON")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "rlhost", "genchat-venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("RLHOST_GENCHAT_PYTHON") != "" || os.Getenv("CI") != "" {
			t.Fatalf("the genchat Python is missing at %s", py)
		}
		t.Skipf("the genchat Python is missing at %s: run `make setup-genchat`", py)
	}
	sess2, _ := s.Open("traj-1", rollout.SamplingParams{MaxTokens: 10, Seed: 2})
	const script = `
import json, sys, openai
c = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2])
out = []
for ch in c.chat.completions.create(model="policy", messages=[{"role": "user", "content": "Say hi."}], temperature=0,
                                    stream=True, logprobs=True, top_logprobs=3):
    for c0 in ch.choices:
        if c0.logprobs is not None and c0.logprobs.content:
            out += [{"token": x.token, "logprob": x.logprob, "top": [[t.token, t.logprob] for t in x.top_logprobs]} for x in c0.logprobs.content]
print(json.dumps(out))
`
	b, err := exec.Command(py, "-c", script, sess2.BaseURL(), sess2.APIKey()).CombinedOutput()
	if err != nil {
		t.Fatalf("openai client: %v\n%s", err, b)
	}
	var got []struct {
		Token   string
		Logprob float64
		Top     [][2]any
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(got) != len(content) {
		t.Fatalf("the openai client read %d tokens, the unstreamed call had %d", len(got), len(content))
	}
	for j, g := range got {
		if len(g.Top) != 3 || g.Top[0][0] != g.Token || math.Abs(g.Top[0][1].(float64)-g.Logprob) > 1e-3 {
			t.Errorf("token %d as the openai client read it: %+v", j, g)
		}
	}
}
