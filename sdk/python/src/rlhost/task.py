"""The Task base class: what every task plugin implements (info and score), and the optional
handlers, mirroring the Go SDK's Task, Configurer, Preprocessor, Prompter and Environment."""

from __future__ import annotations

from typing import List

from rlhost.types import Info, ScoreItem, ScoreResult

# Optional handlers and the feature each one implies. A subclass that defines the method has
# the feature; start, obs and end come together (the environment).
OPTIONAL_HANDLERS = {
    "configure": "configure",
    "preprocess": "preprocess",
    "prompt": "prompt",
    "start": "environment",
    "obs": "environment",
    "end": "environment",
    "use_host": "host_service",
}


class Task:
    """Subclass it and define info and score; define the optional handlers your task needs:

    - configure(self, config: dict) -> None: the task section of the run config; raise
      InvalidArgument naming an unknown key.
    - preprocess(self, record: Record) -> Row: raw record -> dataset row; raise Skip(reason).
    - prompt(self, row: Row) -> Prompt: the messages and tools the policy sees (default: the
      row's own messages and the tools of info).
    - start(self, req: StartRequest) -> StartResult, obs(self, req: ObsRequest) -> ObsResult,
      end(self, req: EndRequest) -> EndResult: the environment of multi-turn tasks (ToolEnv
      gives veRL's tool semantics ready-made).
    - use_host(self, host: Host) -> None: the host's services (host.judge, an LLM judge),
      given before configure; see rlhost.host.

    The host calls handlers concurrently from several threads: guard shared state.
    """

    def info(self) -> Info:
        raise NotImplementedError("Task.info must be defined")

    def score(self, items: List[ScoreItem]) -> List[ScoreResult]:
        raise NotImplementedError("Task.score must be defined")


def features(task: Task, declared: List[str]) -> List[str]:
    """The declared features plus those implied by the handlers task defines, sorted."""
    out = set(declared) | {"score"}
    for method, feature in OPTIONAL_HANDLERS.items():
        if callable(getattr(task, method, None)):
            out.add(feature)
    return sorted(out)
