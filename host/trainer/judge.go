package trainer

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/judge"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// judgeRun is reward_model.judge: the Host service the task plugins call, and what its judge
// holds (a chat endpoint over the policy or a second model).
type judgeRun struct {
	svc    *judge.Service
	chat   *chatserver.Server   // backend policy or model
	policy *rollout.ModelPolicy // backend model
	tk     *tokenizer.Tokenizer // backend model
}

// startJudgeService starts the Host service before the plugins are configured; the judge
// itself is set by setJudge once the models are loaded.
func (t *Trainer) startJudgeService() (*task.HostService, error) {
	if t.cfg.RewardModel.Judge.Backend == "none" || t.cfg.RewardModel.Judge.Backend == "" {
		return nil, nil
	}
	svc, err := judge.Start()
	if err != nil {
		return nil, fmt.Errorf("trainer: reward_model.judge: %w", err)
	}
	t.judge = &judgeRun{svc: svc}
	return svc.HostService(), nil
}

// setJudge builds the judge of reward_model.judge.backend: the policy (maxT: its context),
// a second model, or an OpenAI-compatible endpoint.
func (t *Trainer) setJudge(be gpu.Backend, maxT int, progress io.Writer) error {
	if t.judge == nil {
		return nil
	}
	jc := t.cfg.RewardModel.Judge
	timeout := time.Duration(jc.Timeout * float64(time.Second))
	client := &http.Client{Timeout: timeout}
	var j task.Judger
	switch jc.Backend {
	case "policy":
		t.judge.chat = chatserver.New(t.rolloutPolicy(), t.tk, chatserver.Options{Model: "policy", MaxContext: maxT,
			TemplateKwargs: t.render.Kwargs, ToolFormat: t.render.Format})
		if err := t.judge.chat.Start(); err != nil {
			return err
		}
		j = &judge.Local{Endpoint: t.judge.chat, Model: "policy", MaxTokens: jc.MaxTokens, Seed: uint64(t.cfg.Trainer.Seed), Client: client}
	case "model":
		tk, err := tokenizer.Load(jc.ModelPath)
		if err != nil {
			return fmt.Errorf("trainer: reward_model.judge.model_path: %w", err)
		}
		t.judge.tk = tk
		ck, err := weights.Load(jc.ModelPath)
		if err != nil {
			return fmt.Errorf("trainer: reward_model.judge.model_path: %w", err)
		}
		m, err := model.New(be, ck)
		if err != nil {
			return fmt.Errorf("trainer: reward_model.judge.model_path: %w", err)
		}
		FallBackEOS(progress, jc.ModelPath, m, tk)
		ctxLen := jc.MaxTokens + 4096
		if m.Config.MaxPos > 0 {
			ctxLen = min(ctxLen, m.Config.MaxPos)
		}
		if t.judge.policy, err = rollout.NewModelPolicy(m, 8, ctxLen); err != nil {
			return err
		}
		t.judge.chat = chatserver.New(t.judge.policy, tk, chatserver.Options{Model: "judge", MaxContext: ctxLen})
		if err := t.judge.chat.Start(); err != nil {
			return err
		}
		j = &judge.Local{Endpoint: t.judge.chat, Model: "judge", MaxTokens: jc.MaxTokens, Seed: uint64(t.cfg.Trainer.Seed), Client: client}
	case "openai":
		key := ""
		if jc.APIKeyEnv != "" {
			key = os.Getenv(jc.APIKeyEnv)
		}
		j = &judge.OpenAI{BaseURL: jc.BaseURL, APIKey: key, Model: jc.Model, MaxTokens: jc.MaxTokens, Client: client}
	default:
		return fmt.Errorf("trainer: reward_model.judge.backend=%q: want none, policy, model or openai", jc.Backend)
	}
	t.judge.svc.SetJudge(judge.Timeout{J: j, D: timeout})
	return nil
}

func (j *judgeRun) close() {
	j.svc.Close()
	if j.chat != nil {
		j.chat.Close()
	}
	if j.policy != nil {
		j.policy.Close()
	}
	if j.tk != nil {
		j.tk.Close()
	}
}
