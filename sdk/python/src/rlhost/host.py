"""Calls a task plugin makes back into the host (the Host service of task.v1; sdk/task/host.go
is the Go side).

A task that defines use_host(self, host) gets a Host before configure (and again after every
restart); the SDK declares the feature "host_service" for it, so the host sends the service's
address and token even without a task config. host.has("judge") says whether the run has a
judge model (reward_model.judge.backend in the run config):

    class MyTask(rlhost.Task):
        def use_host(self, host):
            self.host = host

        def score(self, items):
            r = self.host.judge([rlhost.Message("user", "Is 2+2=4? Answer YES or NO.")], max_tokens=4)
            ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional

import grpc

from rlhost import _convert as cv
from rlhost._gen.task.v1 import task_pb2 as pb
from rlhost._gen.task.v1 import task_pb2_grpc as pb_grpc
from rlhost.errors import TaskError
from rlhost.types import Message

FEATURE_HOST_SERVICE = "host_service"
HOST_FEATURE_JUDGE = "judge"


class NoHostCall(TaskError):
    """The host does not offer this call in this run."""


@dataclass
class JudgeResult:
    text: str = ""
    finish_reason: str = ""  # "stop" | "length"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""


class Host:
    """A plugin's connection to the host's Host service (a gRPC target such as unix:///...)."""

    def __init__(self, address: str = "", token: str = "", features: Iterable[str] = ()) -> None:
        self.address = address
        self._token = token
        self.features = list(features)
        self._channel: Optional[grpc.Channel] = grpc.insecure_channel(address) if address else None
        self._stub = pb_grpc.HostStub(self._channel) if self._channel is not None else None

    def has(self, feature: str) -> bool:
        return feature in self.features

    def judge(
        self,
        messages: List[Message],
        max_tokens: int = 0,
        temperature: float = 0.0,
        stop: Optional[List[str]] = None,
        timeout: Optional[float] = None,
    ) -> JudgeResult:
        """One chat completion of the run's judge model. max_tokens 0: the run's
        reward_model.judge.max_tokens; temperature 0: greedy. Raises NoHostCall without a
        judge, grpc.RpcError when the call fails."""
        if not self.has(HOST_FEATURE_JUDGE) or self._stub is None:
            raise NoHostCall("Judge: the host offers no judge: set reward_model.judge.backend in the run config")
        req = pb.JudgeRequest(
            messages=cv.messages_to_proto(messages), max_tokens=max_tokens, temperature=temperature, stop=stop or []
        )
        resp = self._stub.Judge(req, timeout=timeout, metadata=(("authorization", "Bearer " + self._token),))
        return JudgeResult(
            text=resp.text,
            finish_reason=resp.finish_reason,
            prompt_tokens=resp.prompt_tokens,
            completion_tokens=resp.completion_tokens,
            model=resp.model,
        )

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
            self._stub = None
