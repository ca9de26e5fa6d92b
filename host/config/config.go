package config

// Config is a run configuration. Sections and key names are veRL's (ppo_trainer.yaml);
// the struct tags give each key's YAML name, its description (doc) and, for string
// keys with a fixed set of values, the values (enum; the algorithm and reward keys
// take theirs from host/algo and host/reward, see implEnums). Keys lists them all.
//
// A nil pointer means null: "not set, derived from another key" (see the accessors
// such as [Config.ResponseLength]) or "no limit", as each key's description says.
type Config struct {
	Task            Task            `yaml:"task"`
	Data            Data            `yaml:"data"`
	ActorRolloutRef ActorRolloutRef `yaml:"actor_rollout_ref"`
	Critic          Critic          `yaml:"critic"`
	RewardModel     RewardModel     `yaml:"reward_model"`
	Algorithm       Algorithm       `yaml:"algorithm"`
	Trainer         Trainer         `yaml:"trainer"`

	// compat holds the values of the veRL keys that are accepted for
	// compatibility and have no effect (see compatKeys), as a tree of maps from
	// the root; compatSeen the compatKeys that were set.
	compat     map[string]any
	compatSeen []string
}

// Task selects the task plugin.
type Task struct {
	Name          StringList     `yaml:"name" doc:"task plugin name(s) (binary rlhost-task-NAME): a name, a list, or names separated by commas; rlhost train --task NAME (repeatable) sets it. Several names make a mixed run: every plugin starts and each row goes to the task whose Info declares its data_source (docs/training.md)"`
	Config        map[string]any `yaml:"config" doc:"free-form map passed as JSON to the task plugin's Configure; any keys. In a mixed run it goes to every task that has no task.configs entry"`
	Configs       map[string]any `yaml:"configs" doc:"free-form map: task name -> that task's config (a map), used in place of task.config for that task (mixed runs)"`
	RewardWeights map[string]any `yaml:"reward_weights" doc:"free-form map: task name -> factor its training scores are multiplied by before the advantages (default 1; validation reports the unweighted scores)"`
	AdvNormScope  string         `yaml:"adv_norm_scope" enum:"global|task" doc:"batch-wide advantage normalisation (the whitening of gae, reinforce_plus_plus, reinforce_plus_plus_baseline): global = over the whole batch (veRL); task = over each task's trajectories separately. Group estimators (grpo, rloo, ...) normalise within a prompt's group, which never mixes tasks, so this does not change them"`
	// AllowWeakIsolation lets rlhost train a task whose plugin declares weak isolation
	// (task.FeatureWeakIsolation, e.g. swedev's sandbox without bubblewrap).
	AllowWeakIsolation bool         `yaml:"allow_weak_isolation" doc:"train even when the task plugin says its environment cannot keep this machine's files (the dataset's hidden answers included) from the policy (feature weak_isolation, e.g. swedev without bubblewrap); false refuses to start"`
	Timeouts           TaskTimeouts `yaml:"timeouts"`
}

// TaskTimeouts is task.timeouts: how long each call to a task plugin may take before it is
// cancelled and fails (the trajectory or reward fails with the plugin, the call, the
// trajectory and the time named, and is retried once; docs/training.md).
type TaskTimeouts struct {
	Configure  float64  `yaml:"configure" doc:"seconds for the Info and Configure calls after each start or restart of a task plugin"`
	Prompt     float64  `yaml:"prompt" doc:"seconds for each Prompt call (one per dataset row, while the data loads)"`
	Start      float64  `yaml:"start" doc:"seconds for each Start call (a trajectory's environment is set up)"`
	Obs        float64  `yaml:"obs" doc:"seconds for each Obs call (tool calls run, or the user simulator answers)"`
	End        float64  `yaml:"end" doc:"seconds for each End call (the trajectory's final reward: hidden tests, an external episode's end)"`
	Score      *float64 `yaml:"score" doc:"seconds for each Score call; null = reward_model.timeout"`
	Preprocess float64  `yaml:"preprocess" doc:"seconds rlhost preprocess waits for the answer to each record of the Preprocess stream (rlhost preprocess takes key=value overrides for it)"`
}

// Data is the dataset section (veRL data.*).
type Data struct {
	TrainFiles              StringList     `yaml:"train_files" doc:"training parquet file(s) in veRL's schema: a path or a list of paths; each may be a glob (*, ?, [...]) matching at least one file (matches in name order)"`
	ValFiles                StringList     `yaml:"val_files" doc:"validation parquet file(s): a path or a list of paths; each may be a glob (*, ?, [...]) matching at least one file"`
	TrainBatchSize          int            `yaml:"train_batch_size" doc:"prompts per training step; each is sampled actor_rollout_ref.rollout.n times"`
	ValBatchSize            *int           `yaml:"val_batch_size" doc:"prompts per validation batch; null = all validation prompts in one batch"`
	ValMaxSamples           *int           `yaml:"val_max_samples" doc:"validate on the first N rows of val_files only (a fixed subset; veRL picks N at random), in a mixed run the first N of each task; -1 or null = all rows"`
	MaxPromptLength         int            `yaml:"max_prompt_length" doc:"longest prompt in tokens (chat template applied)"`
	MaxResponseLength       int            `yaml:"max_response_length" doc:"longest response in tokens, all turns of a trajectory together"`
	FilterOverlongPrompts   bool           `yaml:"filter_overlong_prompts" doc:"drop rows whose prompt is longer than max_prompt_length when loading"`
	Truncation              string         `yaml:"truncation" enum:"error|left|right|middle" doc:"what to do with a prompt longer than max_prompt_length that was not filtered"`
	Shuffle                 bool           `yaml:"shuffle" doc:"shuffle the training rows every epoch"`
	Seed                    int            `yaml:"seed" doc:"seed of the training-data shuffle"`
	PromptKey               string         `yaml:"prompt_key" doc:"column holding the chat prompt"`
	ReturnRawChat           bool           `yaml:"return_raw_chat" doc:"accepted for veRL compatibility: rlhost always keeps the raw chat (the agent loops need it)"`
	DataloaderNumWorkers    *int           `yaml:"dataloader_num_workers" doc:"accepted for veRL compatibility; no effect"`
	ApplyChatTemplateKwargs map[string]any `yaml:"apply_chat_template_kwargs" doc:"free-form map: extra variables of the chat template, passed wherever it renders (training and validation prompts, tool observations, the chat server), as veRL passes them to apply_chat_template; e.g. {enable_thinking: false} for Qwen3"`
	SamplingWeights         map[string]any `yaml:"sampling_weights" doc:"free-form map: data_source -> mixing weight of the training batches; empty = rows are drawn uniformly from all train_files (veRL's concatenation). Set, each prompt of a batch comes from a data_source drawn with probability weight/sum, walking that source's rows in its own shuffled epochs; every data_source of the training rows needs a weight (0 leaves it out)"`
}

// ActorRolloutRef is veRL's actor_rollout_ref section: the policy model, its
// optimiser and PPO settings, the reference model and the rollout engine.
type ActorRolloutRef struct {
	Model   Model   `yaml:"model"`
	Actor   Actor   `yaml:"actor"`
	Ref     Ref     `yaml:"ref"`
	Rollout Rollout `yaml:"rollout"`
	// NCCLTimeout bounds a collective of a data-parallel job (docs/distributed.md).
	NCCLTimeout int `yaml:"nccl_timeout" doc:"seconds a collective of a job of several ranks waits for every rank; past it every rank stops, naming the ranks that did not come (docs/distributed.md)"`
}

// Model is actor_rollout_ref.model.
type Model struct {
	Path                        string     `yaml:"path" doc:"policy model file (GGUF or safetensors directory)"`
	LoraRank                    int        `yaml:"lora_rank" doc:"LoRA rank; 0 trains all weights"`
	LoraAlpha                   float64    `yaml:"lora_alpha" doc:"LoRA alpha (the update is scaled by lora_alpha/lora_rank)"`
	TargetModules               StringList `yaml:"target_modules" doc:"modules that get LoRA adapters: all-linear or a list of projection names"`
	EnableGradientCheckpointing bool       `yaml:"enable_gradient_checkpointing" doc:"recompute activations in the backward to save memory, where the model backend supports it"`
	UseRemovePadding            bool       `yaml:"use_remove_padding" doc:"accepted for veRL compatibility; no effect (rlhost never pads sequences)"`
	CustomChatTemplate          string     `yaml:"custom_chat_template" doc:"a Jinja chat template used instead of the model's own (a base model whose files carry none, or one that renders tools)"`
}

// Optim is an optimiser section (AdamW), used by the actor and the critic.
type Optim struct {
	LR                 float64   `yaml:"lr" doc:"AdamW learning rate"`
	WeightDecay        float64   `yaml:"weight_decay" doc:"AdamW decoupled weight decay"`
	Betas              []float64 `yaml:"betas" doc:"AdamW (beta1, beta2)"`
	Eps                float64   `yaml:"eps" doc:"AdamW epsilon"`
	LRWarmupSteps      int       `yaml:"lr_warmup_steps" doc:"linear warm-up steps; 0 or negative = use lr_warmup_steps_ratio (as veRL)"`
	LRWarmupStepsRatio float64   `yaml:"lr_warmup_steps_ratio" doc:"warm-up steps as a fraction of the total training steps, used when lr_warmup_steps <= 0"`
	WarmupStyle        string    `yaml:"warmup_style" enum:"constant|cosine" doc:"learning-rate schedule after warm-up"`
	MinLRRatio         float64   `yaml:"min_lr_ratio" doc:"cosine schedule: the final learning rate as a fraction of lr"`
}

// Actor is actor_rollout_ref.actor: the PPO update of the policy.
type Actor struct {
	Optim                   Optim      `yaml:"optim"`
	PPOMiniBatchSize        int        `yaml:"ppo_mini_batch_size" doc:"prompts per optimiser step (as in veRL; times rollout.n trajectories)"`
	PPOMicroBatchSizePerGPU int        `yaml:"ppo_micro_batch_size_per_gpu" doc:"trajectories per forward/backward; gradients accumulate over a mini-batch"`
	PPOEpochs               int        `yaml:"ppo_epochs" doc:"passes over each step's trajectories"`
	ClipRatio               float64    `yaml:"clip_ratio" doc:"PPO clip range epsilon"`
	ClipRatioLow            *float64   `yaml:"clip_ratio_low" doc:"lower clip range (ratio >= 1 - clip_ratio_low); null = clip_ratio"`
	ClipRatioHigh           *float64   `yaml:"clip_ratio_high" doc:"upper clip range (ratio <= 1 + clip_ratio_high); null = clip_ratio"`
	ClipRatioC              float64    `yaml:"clip_ratio_c" doc:"dual-clip constant c (> 1) bounding the loss of negative advantages"`
	LossAggMode             string     `yaml:"loss_agg_mode" doc:"how token losses are reduced to the batch loss"`
	EntropyCoeff            float64    `yaml:"entropy_coeff" doc:"weight of the entropy bonus (subtracted from the loss)"`
	UseKLLoss               bool       `yaml:"use_kl_loss" doc:"add a KL(policy || reference) term to the actor loss (GRPO style)"`
	KLLossCoef              float64    `yaml:"kl_loss_coef" doc:"weight of the KL loss"`
	KLLossType              string     `yaml:"kl_loss_type" doc:"KL estimator of the KL loss; a + suffix takes the forward value of the estimator and the gradient of k2"`
	GradClip                float64    `yaml:"grad_clip" doc:"clip the global gradient norm to this value; 0 = no clipping"`
	Shuffle                 bool       `yaml:"shuffle" doc:"shuffle trajectories between PPO epochs"`
	UseDynamicBsz           bool       `yaml:"use_dynamic_bsz" doc:"micro-batches by token budget instead of ppo_micro_batch_size_per_gpu: each mini-batch's trajectories sorted by length, longest first, and packed end to end (no padding; attention restricted to each sequence) while their tokens stay within ppo_max_token_len_per_gpu (the same gradients as fixed micro-batches; docs/training.md)"`
	PPOMaxTokenLenPerGPU    int        `yaml:"ppo_max_token_len_per_gpu" doc:"use_dynamic_bsz: packed tokens (prompt + response, rounded up to 64) per actor forward/backward"`
	PolicyLoss              PolicyLoss `yaml:"policy_loss"`
	FSDPConfig              FSDP       `yaml:"fsdp_config"`
	Dtype                   string     `yaml:"dtype" enum:"bfloat16|tf32|float32" doc:"how the matrix products compute on trainer.device=cuda, as llm.c's mixed precision: bfloat16 = cublasGemmEx on bfloat16 copies of the weights (made on the device, refreshed after each AdamW step) and of the activations (rounded to nearest even), fp32 accumulation and output; tf32 = fp32 tensors on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32); float32 = cublasSgemm. Master weights, gradients, AdamW moments, log-softmax, the loss and reductions stay fp32 in every mode. It applies to every product of the run's GPU: the update, the old/reference log-probs, the critic and generation. trainer.device=cpu computes in float32 whatever this says (the CPU rollout has actor_rollout_ref.rollout.dtype). veRL's nearest key is actor.fsdp_config.dtype (bfloat16, with fp32 master weights), which rlhost accepts without effect (docs/gpu.md)"`
}

// FSDP is actor_rollout_ref.actor.fsdp_config and critic.fsdp: of veRL's FSDP
// options only fsdp_size takes effect (the others are accepted without effect, compatKeys).
type FSDP struct {
	FSDPSize int `yaml:"fsdp_size" doc:"with several ranks, how many share the model's AdamW moments (ZeRO-1: each rank keeps and updates 1/world of them; the gradients are reduce-scattered and the weights all-gathered, the same update as replicated AdamW; docs/distributed.md): -1 (veRL's default) = every rank, 1 = none (every rank keeps the whole optimizer and the gradients are all-reduced). veRL's hybrid sharding groups (1 < fsdp_size < world) are refused. No effect on one rank; the weights and gradients stay whole on every rank"`
}

// PolicyLoss is actor_rollout_ref.actor.policy_loss.
type PolicyLoss struct {
	LossMode string `yaml:"loss_mode" enum:"vanilla" doc:"policy loss: vanilla = clipped PPO with dual clip"`
}

// Ref is actor_rollout_ref.ref: the frozen reference policy.
type Ref struct {
	LogProbMicroBatchSizePerGPU int   `yaml:"log_prob_micro_batch_size_per_gpu" doc:"trajectories per reference log-prob forward"`
	LogProbUseDynamicBsz        *bool `yaml:"log_prob_use_dynamic_bsz" doc:"reference log-prob micro-batches by token budget (see actor.use_dynamic_bsz); null = actor_rollout_ref.actor.use_dynamic_bsz"`
	LogProbMaxTokenLenPerGPU    *int  `yaml:"log_prob_max_token_len_per_gpu" doc:"packed tokens per reference log-prob forward with dynamic batches; null = actor_rollout_ref.actor.ppo_max_token_len_per_gpu"`
}

// Rollout is actor_rollout_ref.rollout: generation.
type Rollout struct {
	Name                        string    `yaml:"name" enum:"cpu|openai|vllm|sglang|hf" doc:"generation engine: cpu = the built-in engine; openai = an external server at rollout.engine.base_url (docs/engines.md); vllm, sglang and hf run on the built-in engine (a warning says so)"`
	N                           int       `yaml:"n" doc:"responses sampled per prompt (the GRPO group size)"`
	Temperature                 float64   `yaml:"temperature" doc:"sampling temperature"`
	TopP                        float64   `yaml:"top_p" doc:"nucleus sampling threshold; 1 = off"`
	TopK                        int       `yaml:"top_k" doc:"top-k sampling; -1 or 0 = off"`
	DoSample                    bool      `yaml:"do_sample" doc:"sample (true) or decode greedily (false) during training"`
	PromptLength                *int      `yaml:"prompt_length" doc:"longest prompt the engine accepts; null = data.max_prompt_length"`
	ResponseLength              *int      `yaml:"response_length" doc:"response token budget per trajectory; null = data.max_response_length"`
	MaxNumSeqs                  int       `yaml:"max_num_seqs" doc:"sequences decoded together in one batch by the generator"`
	Dtype                       string    `yaml:"dtype" enum:"auto|float32|bfloat16|int8" doc:"weight type of the built-in engine's matrix products: auto (the default) = bfloat16 on CPUs with AVX-512, float32 elsewhere (with AVX2 only, float32 decodes about 4x faster than bfloat16 at batch 16) and on CUDA; the run logs its choice. bfloat16 (veRL's default) = a bfloat16 copy refreshed after each update (on CPUs with AVX-512 BF16 the activations are rounded to bfloat16 too; fp32 accumulation), about 2x the float32 decode speed at batch 16 there; float32 = the training weights (sampler log-probs equal the trainer's); int8 = blocks of 32 with an fp32 scale (on CPUs with AVX-512 VNNI the activations too, as llama.cpp's Q8_0 products: the fastest rollouts there, about 2x bfloat16 at batch 16 without AVX-512 BF16). bfloat16 and int8 need the CPU backend. The loss never uses the sampler's log-probs (docs/compute.md)"`
	LogProbMicroBatchSizePerGPU int       `yaml:"log_prob_micro_batch_size_per_gpu" doc:"trajectories per old-log-prob forward"`
	LogProbUseDynamicBsz        *bool     `yaml:"log_prob_use_dynamic_bsz" doc:"old-log-prob micro-batches by token budget (see actor.use_dynamic_bsz); null = actor_rollout_ref.actor.use_dynamic_bsz"`
	LogProbMaxTokenLenPerGPU    *int      `yaml:"log_prob_max_token_len_per_gpu" doc:"packed tokens per old-log-prob forward with dynamic batches; null = actor_rollout_ref.actor.ppo_max_token_len_per_gpu"`
	CalculateLogProbs           bool      `yaml:"calculate_log_probs" doc:"keep the sampler's log-probs of the response tokens (response_logprobs)"`
	Seed                        *int      `yaml:"seed" doc:"sampling seed; null = trainer.seed"`
	ValKwargs                   ValKwargs `yaml:"val_kwargs"`
	MultiTurn                   MultiTurn `yaml:"multi_turn"`
	Agent                       Agent     `yaml:"agent"`
	Trace                       Trace     `yaml:"trace"`
	Engine                      Engine    `yaml:"engine"`
}

// Engine is actor_rollout_ref.rollout.engine: the external server of rollout.name=openai
// (docs/engines.md).
type Engine struct {
	BaseURL             string  `yaml:"base_url" doc:"the engine's base URL, e.g. http://127.0.0.1:8000 (rollout.name=openai); several engines (a fleet): comma-separated URLs"`
	Protocol            string  `yaml:"protocol" enum:"vllm|sglang|llamacpp|llama-cpp-python" doc:"how token ids and log-probs are asked for: vllm = /v1/completions with token-id prompts and return_token_ids; sglang = /generate with input_ids; llamacpp = llama.cpp server /completion with return_tokens; llama-cpp-python = /v1/completions with text, ids recovered from the pieces and verified"`
	Model               string  `yaml:"model" doc:"model name sent in requests; empty = none sent"`
	APIKeyEnv           string  `yaml:"api_key_env" doc:"environment variable holding the engine's API key (sent as a Bearer token, never logged); empty or unset = no key"`
	Timeout             float64 `yaml:"timeout" doc:"seconds one request may take before it is retried"`
	MaxRetries          int     `yaml:"max_retries" doc:"retries of a request after a connection error, timeout, 429 or 5xx (then the trajectory fails)"`
	UpdateWeightsURL    string  `yaml:"update_weights_url" doc:"after every training step the policy is saved and this URL (absolute, or a path under base_url) is called to reload it; empty = the engine keeps its weights (a warning says so)"`
	UpdateWeightsMethod string  `yaml:"update_weights_method" doc:"HTTP method of the reload call"`
	UpdateWeightsBody   string  `yaml:"update_weights_body" doc:"body of the reload call; {path} becomes the saved directory (JSON-quoted inside a JSON string)"`
	WeightsDir          string  `yaml:"weights_dir" doc:"where the policy is saved for the engine (a path the engine can read); empty = <run dir>/engine_weights"`
}

// ValKwargs is actor_rollout_ref.rollout.val_kwargs: sampling during validation.
type ValKwargs struct {
	N           int     `yaml:"n" doc:"responses per validation prompt"`
	Temperature float64 `yaml:"temperature" doc:"validation sampling temperature"`
	TopP        float64 `yaml:"top_p" doc:"validation nucleus sampling threshold"`
	TopK        int     `yaml:"top_k" doc:"validation top-k; -1 or 0 = off"`
	DoSample    bool    `yaml:"do_sample" doc:"sample during validation; false = greedy"`
}

// MultiTurn is actor_rollout_ref.rollout.multi_turn: the tool agent loop's limits.
type MultiTurn struct {
	Enable                   bool    `yaml:"enable" doc:"allow multi-turn agent loops (tool_agent)"`
	MaxAssistantTurns        *int    `yaml:"max_assistant_turns" doc:"stop after this many assistant turns; null = no limit but the token budget"`
	MaxUserTurns             *int    `yaml:"max_user_turns" doc:"stop after this many user (tool or interaction) turns; null = no limit"`
	MaxParallelCalls         int     `yaml:"max_parallel_calls" doc:"tool calls of one turn that run (concurrently); later ones are ignored"`
	MaxToolResponseLength    int     `yaml:"max_tool_response_length" doc:"tool response text is cut to this many characters"`
	ToolResponseTruncateSide string  `yaml:"tool_response_truncate_side" enum:"left|middle|right" doc:"which part of an over-long tool response is kept"`
	ToolConfigPath           *string `yaml:"tool_config_path" doc:"veRL tool config file; not read: rlhost takes tools from the task plugin (a warning says so)"`
	InteractionConfigPath    *string `yaml:"interaction_config_path" doc:"veRL interaction config file; set (to any path) it turns on the task plugin's interaction (user simulator) as in veRL; the file is not read"`
	Format                   string  `yaml:"format" enum:"auto|hermes|llama3_json|mistral" doc:"tool-call format the model writes, read by the tool agent, the chat server (external_episode tasks) and written by rlhost sft's tool_calls_as_text: hermes = <tool_call>{...}</tool_call> blocks (Qwen2.5, Qwen3, SmolLM2); llama3_json = a {\"name\", \"parameters\"} JSON object as the message, or after <|python_tag|> (Llama 3.1-3.3); mistral = [TOOL_CALLS] and a JSON list, with or without call ids (Mistral, Ministral; also [TOOL_CALLS]name[ARGS]{...}); auto = picked from the chat template and special tokens, hermes when they name no other format (the run prints its choice). veRL's default is hermes (docs/tokenizer.md)"`
}

// Agent is actor_rollout_ref.rollout.agent.
type Agent struct {
	DefaultAgentLoop string `yaml:"default_agent_loop" enum:"single_turn_agent|tool_agent" doc:"agent loop of rows without an agent_name column"`
	NumWorkers       *int   `yaml:"num_workers" doc:"trajectories run concurrently; null = actor_rollout_ref.rollout.max_num_seqs"`
}

// Trace is actor_rollout_ref.rollout.trace; trainer.rollout_trace.* is the older
// spelling of the same keys.
type Trace struct {
	Backend           StringList `yaml:"backend" doc:"trace backend plugin(s) (rlhost-trace-NAME), a name or a list; null = no tracing"`
	Token2Text        *bool      `yaml:"token2text" doc:"decoded prompt and response text beside the token ids of every generate span, and on the trajectory (false: the ids alone); null = on when the backends include local, off for mlflow/weave alone (docs/tracing.md)"`
	MaxSamplesPerStep *int       `yaml:"max_samples_per_step" doc:"trace all n rollouts of this many prompts per step; null = all"`
}

// Critic is the value model of PPO with GAE.
type Critic struct {
	Enable                   *bool       `yaml:"enable" doc:"train a critic (value head); null = only when algorithm.adv_estimator is gae"`
	Model                    CriticModel `yaml:"model"`
	Optim                    Optim       `yaml:"optim"`
	PPOMiniBatchSize         *int        `yaml:"ppo_mini_batch_size" doc:"prompts per critic optimiser step (times rollout.n trajectories); null = actor_rollout_ref.actor.ppo_mini_batch_size (veRL's default)"`
	PPOEpochs                *int        `yaml:"ppo_epochs" doc:"critic passes over each step's trajectories; null = actor_rollout_ref.actor.ppo_epochs (veRL's default)"`
	PPOMicroBatchSizePerGPU  int         `yaml:"ppo_micro_batch_size_per_gpu" doc:"trajectories per critic forward/backward"`
	UseDynamicBsz            *bool       `yaml:"use_dynamic_bsz" doc:"critic micro-batches by token budget (see actor_rollout_ref.actor.use_dynamic_bsz); null = actor_rollout_ref.actor.use_dynamic_bsz"`
	PPOMaxTokenLenPerGPU     int         `yaml:"ppo_max_token_len_per_gpu" doc:"use_dynamic_bsz: packed tokens (prompt + response, rounded up to 64) per critic forward/backward of the update"`
	ForwardMaxTokenLenPerGPU *int        `yaml:"forward_max_token_len_per_gpu" doc:"use_dynamic_bsz: packed tokens per critic forward computing the values; null = ppo_max_token_len_per_gpu"`
	CliprangeValue           float64     `yaml:"cliprange_value" doc:"value clipping range of the critic loss"`
	LossAggMode              string      `yaml:"loss_agg_mode" doc:"how token value losses are reduced"`
	GradClip                 float64     `yaml:"grad_clip" doc:"clip the critic's global gradient norm to this value; 0 = no clipping"`
	FSDP                     FSDP        `yaml:"fsdp"`
}

// CriticModel is critic.model: the checkpoint the critic starts from.
type CriticModel struct {
	Path string `yaml:"path" doc:"the critic's starting checkpoint (GGUF, safetensors directory, or the critic/ directory of an rlhost checkpoint, whose value head is loaded too); empty = actor_rollout_ref.model.path. It must use the actor's tokenizer"`
}

// RewardModel is veRL's reward_model section: how scores are obtained from the task plugin,
// and the optional reward model that scores every trajectory as well.
type RewardModel struct {
	Enable               bool             `yaml:"enable" doc:"score every trajectory with the reward model at reward_model.model.path as well (veRL's reward-model worker: the head's output at the last token of prompt+response); see reward_weight for how it combines with the task's score"`
	Model                RewardModelModel `yaml:"model"`
	RewardWeight         *float64         `yaml:"reward_weight" doc:"reward_model.enable: null = veRL's rule, the reward model's score replaces the task's (the task's Score still runs; its score is logged as reward/task_score/mean); a number w = the task's score + w * the reward model's score"`
	MicroBatchSizePerGPU *int             `yaml:"micro_batch_size_per_gpu" doc:"reward_model.enable: trajectories per reward-model forward; null = 8"`
	Judge                Judge            `yaml:"judge"`
	RewardManager        string           `yaml:"reward_manager" doc:"naive: one Score call per sample; batch: one call per batch; parallel: worker pool with per-sample timeout; dapo: naive plus the overlong penalty"`
	NumWorkers           int              `yaml:"num_workers" doc:"parallel reward manager: concurrent Score calls"`
	Timeout              float64          `yaml:"timeout" doc:"parallel reward manager: seconds per sample before it scores 0"`
	RewardKwargs         map[string]any   `yaml:"reward_kwargs" doc:"free-form reward manager options; overlong_buffer_cfg.{enable (false), len (0), penalty_factor (1.0), log (false)} is the overlong penalty of the dapo manager"`
	RewardWeights        map[string]any   `yaml:"reward_weights" doc:"free-form map: score name -> weight for tasks that return several scores"`
}

// Judge is reward_model.judge: the generative model task plugins may call through the host
// (the Host service's Judge call; LLM-as-judge).
type Judge struct {
	Backend   string  `yaml:"backend" enum:"none|policy|model|openai" doc:"the judge task plugins reach through the host's Host.Judge: none (no judge), policy (the policy being trained), model (a second local model at model_path), openai (an OpenAI-compatible endpoint at base_url)"`
	ModelPath string  `yaml:"model_path" doc:"backend=model: the judge's checkpoint (GGUF or Hugging Face directory with its tokenizer)"`
	BaseURL   string  `yaml:"base_url" doc:"backend=openai: the endpoint's base URL (POST base_url/chat/completions), e.g. http://127.0.0.1:8000/v1"`
	Model     string  `yaml:"model" doc:"backend=openai: the model name sent in requests"`
	APIKeyEnv string  `yaml:"api_key_env" doc:"backend=openai: the environment variable holding the API key (never written to logs or the run's config)"`
	MaxTokens int     `yaml:"max_tokens" doc:"judge reply tokens when a call asks for none"`
	Timeout   float64 `yaml:"timeout" doc:"seconds per judge call"`
}

// RewardModelModel is reward_model.model: the reward model's checkpoint.
type RewardModelModel struct {
	Path           string  `yaml:"path" doc:"a Hugging Face LlamaForSequenceClassification / Qwen2ForSequenceClassification (or ...ForTokenClassification) directory with one label, safetensors; it reads the policy's token ids, so it must share the policy's tokenizer"`
	InputTokenizer *string `yaml:"input_tokenizer" doc:"veRL: re-apply the reward model's chat template to the decoded response; not available: must be null (the reward model reads the trajectory's own tokens, veRL's behaviour with input_tokenizer null)"`
}

// Algorithm is veRL's algorithm section.
type Algorithm struct {
	AdvEstimator       string  `yaml:"adv_estimator" doc:"advantage estimator; gae needs a critic"`
	Gamma              float64 `yaml:"gamma" doc:"discount factor (GAE, REINFORCE++)"`
	Lam                float64 `yaml:"lam" doc:"GAE lambda"`
	NormAdvByStdInGRPO bool    `yaml:"norm_adv_by_std_in_grpo" doc:"GRPO: divide by the group's std; false = Dr.GRPO"`
	UseKLInReward      bool    `yaml:"use_kl_in_reward" doc:"subtract kl_ctrl.kl_coef * KL(old || ref) from the token rewards"`
	KLPenalty          string  `yaml:"kl_penalty" doc:"KL estimator of the in-reward penalty"`
	KLCtrl             KLCtrl  `yaml:"kl_ctrl"`
}

// KLCtrl is algorithm.kl_ctrl: the in-reward KL coefficient controller.
type KLCtrl struct {
	Type     string  `yaml:"type" enum:"fixed|adaptive" doc:"fixed coefficient or the adaptive controller"`
	KLCoef   float64 `yaml:"kl_coef" doc:"(initial) KL coefficient"`
	Horizon  int     `yaml:"horizon" doc:"adaptive controller horizon"`
	TargetKL float64 `yaml:"target_kl" doc:"adaptive controller target KL"`
}

// Trainer is veRL's trainer section: the loop, validation, checkpoints and logging.
type Trainer struct {
	ProjectName               string     `yaml:"project_name" doc:"project name (trace project, MLflow experiment)"`
	ExperimentName            string     `yaml:"experiment_name" doc:"experiment name (MLflow run name, run directory); empty = task.name"`
	TotalEpochs               int        `yaml:"total_epochs" doc:"passes over the training data"`
	TotalTrainingSteps        *int       `yaml:"total_training_steps" doc:"stop after this many steps; null = total_epochs worth"`
	TestFreq                  int        `yaml:"test_freq" doc:"validate every N steps (and after the last); -1 = never during training"`
	SaveFreq                  int        `yaml:"save_freq" doc:"checkpoint every N steps (and after the last); -1 = never"`
	ValBeforeTrain            bool       `yaml:"val_before_train" doc:"validate before the first step"`
	ValOnly                   bool       `yaml:"val_only" doc:"validate once and stop"`
	Logger                    StringList `yaml:"logger" doc:"metric sinks: a name or a list (console, jsonl, mlflow)"`
	DefaultLocalDir           string     `yaml:"default_local_dir" doc:"parent directory of run directories"`
	RunDir                    *string    `yaml:"run_dir" doc:"this run's directory (config, metrics, checkpoints, traces, logs); null = default_local_dir/project_name/experiment_name"`
	ResumeMode                string     `yaml:"resume_mode" enum:"auto|disable|resume_path" doc:"auto: resume from the run directory's latest checkpoint if any; disable: start from step 0 (refused if the run directory already holds a run); resume_path: from resume_from_path"`
	ResumeFromPath            *string    `yaml:"resume_from_path" doc:"checkpoint directory to resume from (resume_mode=resume_path)"`
	CriticWarmup              int        `yaml:"critic_warmup" doc:"the actor updates from this step on (as veRL: when critic_warmup <= step); the steps before train only the critic"`
	MaxActorCkptToKeep        *int       `yaml:"max_actor_ckpt_to_keep" doc:"keep only the newest N checkpoints; null = all"`
	Seed                      int        `yaml:"seed" doc:"seed of sampling, initialisation and everything random but the data shuffle"`
	Device                    string     `yaml:"device" enum:"cpu|cuda" doc:"compute device"`
	NGPUsPerNode              int        `yaml:"n_gpus_per_node" doc:"accepted for veRL compatibility; rlhost trains in one process"`
	NNodes                    int        `yaml:"nnodes" doc:"accepted for veRL compatibility; rlhost trains on one node"`
	LogValGenerations         int        `yaml:"log_val_generations" doc:"validation generations to log per validation"`
	MLflowTrackingURI         *string    `yaml:"mlflow_tracking_uri" doc:"MLflow server for the mlflow logger; null = the MLFLOW_TRACKING_URI environment variable"`
	MaxFailedFraction         float64    `yaml:"max_failed_fraction" doc:"a training step where more than this fraction of the trajectories failed (dropped after a retry), or of the rewards failed (Score errors, timeouts, non-finite scores), is not trained on: no update, a warning with the first error, training/skipped_step=1 in the metrics"`
	MaxConsecutiveFailedSteps int        `yaml:"max_consecutive_failed_steps" doc:"this many skipped steps in a row (see max_failed_fraction) stop the run with an error naming the first error; a run that ends without one trained step fails too"`
}

// Default returns the defaults: veRL's structure with values for training
// SmolLM2-135M-Instruct on a small CPU machine.
func Default() *Config {
	return &Config{
		Task: Task{Config: map[string]any{}, Configs: map[string]any{}, RewardWeights: map[string]any{}, AdvNormScope: "global",
			Timeouts: TaskTimeouts{Configure: 120, Prompt: 60, Start: 300, Obs: 600, End: 900, Preprocess: 60}},
		Data: Data{
			TrainFiles:            StringList{"data/gsm8k/train.parquet"},
			ValFiles:              StringList{"data/gsm8k/test.parquet"},
			TrainBatchSize:        4,
			ValMaxSamples:         ptr(16),
			MaxPromptLength:       512,
			MaxResponseLength:     256,
			FilterOverlongPrompts: true,
			Truncation:            "error",
			Shuffle:               true,
			Seed:                  42,
			PromptKey:             "prompt",
			SamplingWeights:       map[string]any{},
		},
		ActorRolloutRef: ActorRolloutRef{
			NCCLTimeout: 600,
			Model: Model{
				Path:          DefaultModelPath,
				LoraAlpha:     16,
				TargetModules: StringList{"all-linear"},
			},
			Actor: Actor{
				Optim:                   defaultOptim(),
				PPOMiniBatchSize:        4,
				PPOMicroBatchSizePerGPU: 2,
				PPOEpochs:               1,
				ClipRatio:               0.2,
				ClipRatioC:              3.0,
				LossAggMode:             "token-mean",
				KLLossCoef:              0.001,
				KLLossType:              "low_var_kl",
				GradClip:                1.0,
				PolicyLoss:              PolicyLoss{LossMode: "vanilla"},
				FSDPConfig:              FSDP{FSDPSize: -1},
				PPOMaxTokenLenPerGPU:    16384,
				Dtype:                   "bfloat16",
			},
			Ref: Ref{LogProbMicroBatchSizePerGPU: 4},
			Rollout: Rollout{
				Name:                        "cpu",
				N:                           4,
				Temperature:                 1.0,
				TopP:                        1.0,
				TopK:                        -1,
				DoSample:                    true,
				MaxNumSeqs:                  16,
				Dtype:                       "auto",
				LogProbMicroBatchSizePerGPU: 4,
				ValKwargs:                   ValKwargs{N: 1, Temperature: 0, TopP: 1.0, TopK: -1},
				MultiTurn: MultiTurn{
					Enable:                   true,
					MaxParallelCalls:         1,
					MaxToolResponseLength:    256,
					ToolResponseTruncateSide: "middle",
					Format:                   "auto",
				},
				Agent: Agent{DefaultAgentLoop: "single_turn_agent"},
				Engine: Engine{Protocol: "vllm", APIKeyEnv: "RLHOST_ENGINE_API_KEY", Timeout: 300, MaxRetries: 3,
					UpdateWeightsMethod: "POST", UpdateWeightsBody: `{"model_path": "{path}"}`},
			},
		},
		Critic: Critic{
			Optim:                   defaultOptim(),
			PPOMicroBatchSizePerGPU: 2,
			PPOMaxTokenLenPerGPU:    32768,
			CliprangeValue:          0.5,
			LossAggMode:             "token-mean",
			GradClip:                1.0,
			FSDP:                    FSDP{FSDPSize: -1},
		},
		RewardModel: RewardModel{
			Judge:         Judge{Backend: "none", MaxTokens: 256, Timeout: 120},
			RewardManager: "batch",
			NumWorkers:    2,
			Timeout:       300,
			RewardKwargs:  map[string]any{},
			RewardWeights: map[string]any{},
		},
		Algorithm: Algorithm{
			AdvEstimator:       "grpo",
			Gamma:              1.0,
			Lam:                1.0,
			NormAdvByStdInGRPO: true,
			KLPenalty:          "kl",
			KLCtrl:             KLCtrl{Type: "fixed", KLCoef: 0.001, Horizon: 10000, TargetKL: 0.1},
		},
		Trainer: Trainer{
			ProjectName:               "rlhost",
			TotalEpochs:               1,
			TestFreq:                  -1,
			SaveFreq:                  -1,
			ValBeforeTrain:            true,
			Logger:                    StringList{"console", "jsonl"},
			DefaultLocalDir:           "runs",
			ResumeMode:                "auto",
			Seed:                      1,
			Device:                    "cpu",
			NGPUsPerNode:              1,
			NNodes:                    1,
			MaxFailedFraction:         0.5,
			MaxConsecutiveFailedSteps: 3,
		},
	}
}

func defaultOptim() Optim {
	return Optim{
		LR:          1e-5,
		WeightDecay: 0.01,
		Betas:       []float64{0.9, 0.999},
		Eps:         1e-8,
		WarmupStyle: "constant",
	}
}

func ptr[T any](v T) *T { return &v }

// StringList is a key that takes a string or a list of strings (veRL's
// data.train_files, for example). A single string is a list of one.
type StringList []string
