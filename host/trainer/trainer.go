package trainer

import (
	"context"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/dist"
	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/reward"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/host/tracing"
)

// Options are what the command line gives beside the config.
type Options struct {
	Log      hclog.Logger
	Progress io.Writer // progress bars and the step summary (stderr)
	Plugin   plugin.Options
	// Comm is this process's rank in a data-parallel job (docs/distributed.md); nil: one
	// rank. Each rank trains on its share of every step's prompts; rank 0 alone writes the
	// run directory's config, metrics, traces, validation and checkpoints.
	Comm dist.Comm
}

// Trainer runs one training run.
type Trainer struct {
	cfg    *config.Config
	opts   Options
	log    hclog.Logger
	runDir string

	tasks   *taskSet
	tk      *tokenizer.Tokenizer
	render  rollout.Chat // tk with data.apply_chat_template_kwargs and the tool-call format
	actor   *model.Model
	ref     *model.Model // nil when no KL term needs it
	opt     *model.AdamW
	critic  *critic // nil without a critic (critic.enable, adv_estimator=gae)
	policy  *rollout.ModelPolicy
	chat    *chatserver.Server // external_episode tasks: the policy as an OpenAI endpoint
	engine  *engine            // rollout.name=openai: rollouts from an external engine (engine.go)
	acts    *model.ActsCache
	refActs *model.ActsCache
	rew     reward.Manager
	rm      *rewardScorer // reward_model.enable; nil otherwise
	judge   *judgeRun     // reward_model.judge.backend != none; nil otherwise
	klCtl   algo.KLController
	logger  metrics.Logger
	tracer  *tracing.Tracer

	train, val []example
	sampler    *sampler
	step       int // last finished step
	totalSteps int

	budget failureBudget // trainer.max_failed_fraction, trainer.max_consecutive_failed_steps

	// dp is this rank's part of a data-parallel job; the zero value is one rank (dp.go).
	dp dataParallel
}

// New prepares a run as its open-steps, in order: the run directory, the device, the task
// plugins, the tokenizer and the actor, the reference policy, the critic and the reward model,
// the optimiser, the rollout's policy, the judge and the chat server, the reward manager, the
// data, the checkpoint to resume from, the metric loggers and the trace backends. A step that
// fails closes what the steps before it opened.
func New(ctx context.Context, cfg *config.Config, opts Options) (*Trainer, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	t := &Trainer{cfg: cfg, opts: opts, log: opts.Log, runDir: cfg.RunDir(), dp: dataParallel{comm: opts.Comm}}
	if err := t.checkRanks(); err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings() {
		t.log.Warn(w)
	}
	o := &opening{}
	for _, open := range []func(context.Context, *opening) error{
		t.openRunDir,        // config.yaml; a fresh run refuses a used directory
		t.openDevice,        // trainer.device
		t.openTaskPlugins,   // the judge's Host service, then the task plugins
		t.loadTokenizer,     // or actor_rollout_ref.model.custom_chat_template
		t.loadActor,         // the policy's weights
		t.resolveToolFormat, // multi_turn.format, the chat rendering
		t.enableLoRA,        // lora_rank > 0: the reference is the actor without adapters
		t.openReference,     // a copy of the initial weights, when a KL term needs it
		t.loadCritic,        // critic.enable
		t.loadRewardModel,   // reward_model.enable
		t.openOptimizer,     // the actor's AdamW
		t.openRollout,       // the external engine, or the built-in policy
		t.openJudge,         // reward_model.judge.backend
		t.openChatServer,    // tasks with external episodes
		t.openRewardManager, // reward_model.reward_manager
		t.openKLController,  // algorithm.kl_ctrl
		t.loadTrainData,     // data.train_files, the sampler, the run's steps
		t.loadValData,       // data.val_files
		t.warnToolsOnce,     // the tool-call format; tools the chat template drops
		t.resumeRun,         // trainer.resume_mode
		t.openLoggers,       // trainer.logger
		t.openTracer,        // actor_rollout_ref.rollout.trace
	} {
		if err := open(ctx, o); err != nil {
			t.Close()
			return nil, err
		}
	}
	return t, nil
}

// RunDir is where the run writes.
func (t *Trainer) RunDir() string { return t.runDir }

// Close releases the plugin, the policy and the loggers.
func (t *Trainer) Close() {
	if t.chat != nil {
		t.chat.Close()
	}
	if t.policy != nil {
		t.policy.Close()
	}
	if t.tasks != nil {
		t.tasks.Close()
	}
	if t.judge != nil {
		t.judge.close()
	}
	if t.tk != nil {
		t.tk.Close()
	}
	if t.rm != nil {
		t.rm.close()
	}
	if t.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := t.tracer.Close(ctx); err != nil {
			t.log.Warn("closing the trace backends", "error", err)
		}
		cancel()
		t.tracer = nil
	}
	if t.logger != nil {
		t.logger.Close()
		t.logger = nil
	}
}
