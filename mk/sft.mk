# Supervised fine-tuning (host/sft, rlhost sft): its tests, the golden generator and the
# demo where tool use is learned (docs/training.md, "Tool use from a cold start").
.PHONY: test-sft sft-goldens demo-tools

TEST_TARGETS += test-sft

DEMO_TOOLS_DIR  := runs/demo-tools
DEMO_TOOLS_SFT_STEPS ?= 16
DEMO_TOOLS_CKPT := $(DEMO_TOOLS_DIR)/sft/checkpoints/global_step_$(DEMO_TOOLS_SFT_STEPS)
# Extra overrides, e.g. DEMO_TOOLS_GRPO_ARGS=trainer.val_only=true for the validation alone.
DEMO_TOOLS_SFT_ARGS  ?=
DEMO_TOOLS_GRPO_ARGS ?=

test-sft: tokenizers-lib ## host/sft: the SFT step vs transformers (golden), data, config, a full run on a tiny model
	$(GO) test -count=1 ./host/sft/

sft-goldens: setup-trl ## regenerate host/sft/testdata (needs torch, transformers, tokenizers)
	$(TRL_PY) scripts/goldens/sft/make_goldens.py host/sft/testdata

# The set-up is make demo's (demo-setup: the three binaries the runs use and the GSM8K parquet
# files, sft/train.parquet and sft/test.parquet among them), built once for the three runs.
demo-tools: demo-setup ## SFT cold start on tool-using GSM8K trajectories, then GRPO with the tool vs GRPO alone
	@if [ -d $(DEMO_TOOLS_DIR) ]; then echo "== removing the previous run in $(DEMO_TOOLS_DIR) =="; rm -rf $(DEMO_TOOLS_DIR); fi
	@test -s data/gsm8k/sft/train.parquet || $(BIN)/rlhost preprocess --task gsm8k --input $(GSM8K_RAW) --output-dir data/gsm8k
	@echo "== 1/3 SFT cold start =="
	$(BIN)/rlhost sft -c examples/configs/gsm8k-sft.yaml trainer.total_training_steps=$(DEMO_TOOLS_SFT_STEPS) \
		trainer.save_freq=$(DEMO_TOOLS_SFT_STEPS) $(DEMO_TOOLS_SFT_ARGS)
	@echo "== 2/3 GRPO from the cold start =="
	$(BIN)/rlhost train -c examples/configs/gsm8k-tools.yaml actor_rollout_ref.model.path=$(DEMO_TOOLS_CKPT) \
		trainer.experiment_name=grpo-cold-start trainer.run_dir=$(DEMO_TOOLS_DIR)/grpo-cold-start $(DEMO_TOOLS_GRPO_ARGS)
	@echo "== 3/3 the same GRPO from the base model =="
	$(BIN)/rlhost train -c examples/configs/gsm8k-tools.yaml \
		trainer.experiment_name=grpo-base trainer.run_dir=$(DEMO_TOOLS_DIR)/grpo-base $(DEMO_TOOLS_GRPO_ARGS)
	$(BIN)/rlhost sft compare --out $(DEMO_TOOLS_DIR)/compare.png \
		cold-start=$(DEMO_TOOLS_DIR)/grpo-cold-start no-cold-start=$(DEMO_TOOLS_DIR)/grpo-base
