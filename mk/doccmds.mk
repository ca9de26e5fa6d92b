# The documented commands: the shell blocks of README.md and docs/*.md marked runnable run as
# written (with the small overrides their marker states) on a fresh copy of the checkout, with
# ../shared beside it (scripts/doccmds; docs/runnable-docs.md). The caches (Go's build cache,
# the tokenizers library, the default model) are shared; `make build` here first fills the
# build cache with the release builds' packages (-trimpath: the same cache entries in any
# folder), so the blocks' own `make build` in the copy only links.
DOC_FILES := README.md $(sort $(wildcard docs/*.md))

.PHONY: test-doc-commands doc-commands-list

TEST_TARGETS += test-doc-commands

test-doc-commands: build model ## run the shell blocks marked runnable in README.md and docs/*.md on a fresh copy of the checkout (docs/runnable-docs.md)
	$(GO) vet ./scripts/doccmds
	$(GO) test -count=1 ./scripts/doccmds
	$(GO) run ./scripts/doccmds $(DOC_FILES)

doc-commands-list: ## print the runnable blocks of README.md and docs/*.md and each command as the test runs it
	$(GO) run ./scripts/doccmds -list $(DOC_FILES)
