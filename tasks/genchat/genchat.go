// Package genchat is the gen_chat task: episodes are run by an external environment, a web
// service at the task's url that plays the episode against an OpenAI-compatible endpoint the
// host serves for each trajectory (the external_episode feature). Start asks the environment
// to run an episode; End waits for it and returns its turns, reward and metrics. Command
// rlhost-task-genchat serves it. The environment's HTTP contract is in docs/genchat.md.
package genchat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/gsm8k"
)

// Version is the plugin's version.
const Version = "0.1.0"

// AgentName is the agent loop that runs gen_chat trajectories (host/rollout's external loop).
// Rows leave agent_name empty: the host picks this loop for every row of a task that declares
// the external_episode feature.
const AgentName = "external_agent"

// DataSource is the data_source of the rows Preprocess makes.
const DataSource = "genchat/gsm8k"

// Config is the task section of the run config.
type Config struct {
	URL         string        `config:"url" want:"an http(s) URL"`                      // the environment's base URL (required for episodes)
	Timeout     time.Duration `config:"timeout_s"`                                      // an episode's deadline; default 300 s
	Poll        time.Duration `config:"poll_s"`                                         // long-poll wait of one GET; default 10 s
	ScoreMethod gsm8k.Method  `config:"score_method" want:"\"strict\" or \"flexible\""` // Score's answer extraction when the environment gives no reward
	// Judge: Score asks the run's judge model (the host's Host.Judge) to grade the response
	// instead of matching a number: open-ended chat. Off by default (GSM8K's rule).
	Judge bool `config:"judge"`
}

// Task is the gen_chat task.
type Task struct {
	Client *http.Client
	host   *task.Host // the host's services (UseHost)
	mu     sync.Mutex
	cfg    Config
	eps    map[string]*episode // by instance id
	nextID int
}

type episode struct {
	id        string // the environment's episode id
	started   time.Time
	modelURL  string
	trajectID string
}

// New returns the task with its default config (no url: Configure must set it).
func New() *Task {
	return &Task{Client: &http.Client{}, cfg: Config{Timeout: 300 * time.Second, Poll: 10 * time.Second, ScoreMethod: gsm8k.Flexible},
		eps: map[string]*episode{}}
}

var sampleRow = task.Row{
	DataSource:  DataSource,
	Prompt:      []task.Message{{Role: "user", Content: "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?"}},
	Ability:     "math",
	RewardModel: task.RewardModel{Style: "rule", GroundTruth: "72"},
	ExtraInfo:   map[string]any{"split": "train", "index": int64(0)},
}

// Info describes the plugin.
func (t *Task) Info(context.Context) (task.Info, error) {
	row := sampleRow
	return task.Info{
		Name:          "genchat",
		Version:       Version,
		Description:   "text-level agents at an OpenAI-compatible endpoint: an external environment runs each episode against the policy",
		Features:      []string{task.FeatureExternalEpisode},
		DataSources:   []string{DataSource},
		DefaultInputs: []task.InputFile{{Split: "train", Name: "train.jsonl"}, {Split: "test", Name: "test.jsonl"}},
		ConfigSchema: []byte(`{"type":"object","properties":{` +
			`"url":{"type":"string","description":"the environment's base URL (docs/genchat.md)"},` +
			`"timeout_s":{"type":"number","description":"an episode's deadline in seconds (default 300)"},` +
			`"poll_s":{"type":"number","description":"long-poll wait of one status request in seconds (default 10)"},` +
			`"score_method":{"type":"string","enum":["strict","flexible"],"description":"answer extraction of Score when the environment returns no reward"},` +
			`"judge":{"type":"boolean","description":"Score asks the run's judge model (reward_model.judge) for a YES/NO verdict on each response (score 1 or 0) instead of matching a number (default false)"}}}`),
		Samples: []task.Sample{{Split: "train", Row: &row, ReferenceSolution: "48/2 = 24 in May, 48+24 = 72.\n#### 72"},
			{Split: "train", Record: map[string]any{"question": "What is 2+3?", "answer": "2+3=<<2+3=5>>5\n#### 5"}, ReferenceSolution: "#### 5"}},
	}, nil
}

// UseHost keeps the host's services for Score's judge (task.HostUser).
func (t *Task) UseHost(h *task.Host) {
	t.mu.Lock()
	t.host = h
	t.mu.Unlock()
}

// Configure applies the task config (the keys of Config's tags); a bad or unknown key is
// InvalidArgument naming it.
func (t *Task) Configure(_ context.Context, raw map[string]any) error {
	cfg := New().cfg
	if err := task.DecodeConfig("genchat", raw, &cfg); err != nil {
		return err
	}
	if _, ok := raw["url"]; ok {
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return task.InvalidArgument("genchat config key %q: want an http(s) URL, got %q", "url", cfg.URL)
		}
		cfg.URL = strings.TrimRight(cfg.URL, "/")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"timeout_s", cfg.Timeout}, {"poll_s", cfg.Poll}} {
		if d.v <= 0 {
			return task.InvalidArgument("genchat config key %q: want a positive number of seconds, got %v", d.key, d.v.Seconds())
		}
	}
	if cfg.ScoreMethod != gsm8k.Strict && cfg.ScoreMethod != gsm8k.Flexible {
		return task.InvalidArgument("genchat config key %q: want \"strict\" or \"flexible\", got %q", "score_method", cfg.ScoreMethod)
	}
	if cfg.Judge {
		t.mu.Lock()
		h := t.host
		t.mu.Unlock()
		if !h.Has(task.HostFeatureJudge) {
			return task.InvalidArgument("genchat config key %q: the host offers no judge model: set reward_model.judge.backend (policy, model or openai) in the run config", "judge")
		}
	}
	t.mu.Lock()
	t.cfg = cfg
	t.mu.Unlock()
	return nil
}

func (t *Task) config() Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cfg
}

// Preprocess turns a GSM8K record {question, answer} into a row whose prompt is the question
// alone (the environment brings its own system prompt and tools).
func (t *Task) Preprocess(_ context.Context, r task.Record) (task.Row, error) {
	question, okQ := r.Data["question"].(string)
	answer, okA := r.Data["answer"].(string)
	if !okQ || !okA {
		return task.Row{}, task.InvalidArgument("genchat record %d of split %q: want string fields \"question\" and \"answer\"", r.Index, r.Split)
	}
	solution, err := gsm8k.ExtractGroundTruth(answer)
	if err != nil {
		return task.Row{}, task.InvalidArgument("genchat record %d of split %q: %v", r.Index, r.Split, err)
	}
	return task.Row{DataSource: DataSource, Prompt: []task.Message{{Role: "user", Content: question}}, Ability: "math",
		RewardModel: task.RewardModel{Style: "rule", GroundTruth: solution},
		ExtraInfo:   map[string]any{"split": r.Split, "index": r.Index, "answer": answer, "question": question}}, nil
}

// Score rates a final answer against a numeric ground truth (GSM8K's rule), for environments
// that return no reward of their own.
func (t *Task) Score(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	cfg := t.config()
	if cfg.Judge {
		return t.judgeScore(ctx, items)
	}
	out := make([]task.ScoreResult, len(items))
	for i, it := range items {
		var gt string
		switch x := it.GroundTruth.(type) {
		case string:
			gt = x
		case float64:
			gt = strconv.FormatFloat(x, 'f', -1, 64)
		case int64:
			gt = strconv.FormatInt(x, 10)
		default:
			out[i].Err = fmt.Sprintf("genchat: ground truth %v is not a string or number", it.GroundTruth)
			continue
		}
		out[i].Score = gsm8k.ComputeScore(it.Solution, gt, cfg.ScoreMethod, 0, 1)
	}
	return out, nil
}

// Wire types of the environment contract (docs/genchat.md).
type startBody struct {
	TrajectoryID string   `json:"trajectory_id"`
	Row          task.Row `json:"row"`
	Step         int64    `json:"step"`
	RolloutN     int      `json:"rollout_n"`
	Validate     bool     `json:"validate"`
	Endpoint     struct {
		BaseURL string `json:"base_url"`
		APIKey  string `json:"api_key"`
		Model   string `json:"model"`
	} `json:"endpoint"`
}

type statusBody struct {
	Done             *bool              `json:"done"`
	Reward           *float64           `json:"reward"`
	RewardComponents map[string]float64 `json:"reward_components"`
	Messages         []task.Message     `json:"messages"`
	Metrics          map[string]float64 `json:"metrics"`
	Error            string             `json:"error"`
}

// Start asks the environment to run an episode against the trajectory's endpoint.
func (t *Task) Start(ctx context.Context, req task.StartRequest) (task.StartResult, error) {
	cfg := t.config()
	if cfg.URL == "" {
		return task.StartResult{}, fmt.Errorf("%w: genchat: no url in the task config", task.ErrNotConfigured)
	}
	if req.EndpointBaseURL == "" || req.EndpointAPIKey == "" {
		return task.StartResult{}, task.InvalidArgument("genchat: Start without an endpoint (the host must run gen_chat with the external agent loop)")
	}
	var b startBody
	b.TrajectoryID, b.Row, b.Step, b.RolloutN, b.Validate = req.TrajectoryID, req.Row, req.Step, req.RolloutN, req.Validate
	b.Endpoint.BaseURL, b.Endpoint.APIKey, b.Endpoint.Model = req.EndpointBaseURL, req.EndpointAPIKey, "policy"
	body, err := json.Marshal(b)
	if err != nil {
		return task.StartResult{}, task.InvalidArgument("genchat: row of trajectory %s: %v", req.TrajectoryID, err)
	}
	var ans struct {
		EpisodeID string `json:"episode_id"`
	}
	if err := t.do(ctx, "POST", cfg.URL+"/episodes", body, &ans); err != nil {
		return task.StartResult{}, err
	}
	if ans.EpisodeID == "" {
		return task.StartResult{}, fmt.Errorf("genchat: environment %s: POST /episodes answered without episode_id", cfg.URL)
	}
	t.mu.Lock()
	t.nextID++
	id := fmt.Sprintf("gc-%d", t.nextID)
	t.eps[id] = &episode{id: ans.EpisodeID, started: time.Now(), modelURL: req.EndpointBaseURL, trajectID: req.TrajectoryID}
	t.mu.Unlock()
	return task.StartResult{InstanceID: id, Lease: cfg.Timeout}, nil
}

// Obs is not used: the environment calls the model, not the other way round. An unknown
// instance is NotFound, as for every RPC that names one.
func (t *Task) Obs(_ context.Context, req task.ObsRequest) (task.ObsResult, error) {
	t.mu.Lock()
	_, ok := t.eps[req.InstanceID]
	t.mu.Unlock()
	if !ok {
		return task.ObsResult{}, task.NotFound("genchat: unknown or ended instance %q", req.InstanceID)
	}
	return task.ObsResult{}, task.InvalidArgument("genchat: Obs is not used by external episodes")
}

// End waits for the episode (bounded by the config's timeout and the call's deadline) and
// returns its turns, reward and metrics; End(aborted) cancels it.
func (t *Task) End(ctx context.Context, req task.EndRequest) (task.EndResult, error) {
	cfg := t.config()
	t.mu.Lock()
	ep := t.eps[req.InstanceID]
	delete(t.eps, req.InstanceID)
	t.mu.Unlock()
	if ep == nil {
		return task.EndResult{}, task.NotFound("genchat: unknown or ended instance %q", req.InstanceID)
	}
	epURL := cfg.URL + "/episodes/" + url.PathEscape(ep.id)
	if req.Aborted {
		_ = t.do(ctx, "DELETE", epURL, nil, nil)
		return task.EndResult{}, nil
	}
	ctx, cancel := context.WithDeadline(ctx, ep.started.Add(cfg.Timeout))
	defer cancel()
	for {
		var st statusBody
		err := t.do(ctx, "GET", fmt.Sprintf("%s?wait=%g", epURL, cfg.Poll.Seconds()), nil, &st)
		if err == nil && st.Done == nil {
			err = fmt.Errorf("genchat: environment %s: episode %s: the status has no \"done\"", cfg.URL, ep.id)
		}
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("genchat: episode %s (trajectory %s) did not finish within %v: %w", ep.id, ep.trajectID, cfg.Timeout, ctx.Err())
			}
			_ = t.do(context.WithoutCancel(ctx), "DELETE", epURL, nil, nil)
			return task.EndResult{}, err
		}
		if !*st.Done {
			continue
		}
		if st.Error != "" {
			return task.EndResult{}, fmt.Errorf("genchat: environment %s: episode %s (trajectory %s) failed: %s", cfg.URL, ep.id, ep.trajectID, st.Error)
		}
		res := task.EndResult{Messages: st.Messages, Metrics: st.Metrics, RewardComponents: st.RewardComponents}
		if st.Reward != nil {
			res.HasReward, res.Reward = true, *st.Reward
		}
		if res.Metrics == nil {
			res.Metrics = map[string]float64{}
		}
		res.Metrics["genchat/episode_seconds"] = time.Since(ep.started).Seconds()
		return res, nil
	}
}

// do sends one request to the environment and decodes its JSON answer into out (if not nil).
func (t *Task) do(ctx context.Context, method, u string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("genchat: %s %s: %v", method, u, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return fmt.Errorf("genchat: environment %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("genchat: environment %s %s: reading the answer: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("genchat: environment %s %s: %s: %s", method, u, resp.Status, clip(string(b), 300))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("genchat: environment %s %s: the answer is not the expected JSON: %v (%q)", method, u, err, clip(string(b), 120))
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
