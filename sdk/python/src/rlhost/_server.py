"""The gRPC servicer of rlhost.task.v1.Task over a Task object (sdk/task/server.go is the Go side)."""

from __future__ import annotations

import logging
import os
import traceback
from typing import Any, Callable, Iterator, List, NoReturn, TypeVar

import grpc

from rlhost import _convert as cv
from rlhost._gen.task.v1 import task_pb2 as pb
from rlhost._gen.task.v1 import task_pb2_grpc as pb_grpc
from rlhost.errors import InvalidArgument, NotConfigured, NotFound, Skip
from rlhost.host import Host
from rlhost.task import Task, features
from rlhost.types import (
    EndRequest,
    ObsKind,
    ObsRequest,
    Prompt,
    Record,
    ScoreItem,
    ScoreResult,
    StartRequest,
)

# The minor revision of task.v1 this SDK implements (1: the Host service and
# ConfigureRequest.host_service).
PROTOCOL_MINOR = 1

T = TypeVar("T")

# The packages whose frames an exception's message leaves out: this SDK's and gRPC's.
_SDK_DIR = os.path.dirname(os.path.abspath(__file__))
_GRPC_DIR = os.path.dirname(os.path.abspath(grpc.__file__))
MAX_FRAMES = 4


def plugin_frames(e: BaseException, limit: int = MAX_FRAMES) -> List[str]:
    """The plugin's own frames of an exception's traceback, innermost first, as "function
    file.py:line" (the full traceback goes to the plugin's log)."""
    out: List[str] = []
    for fs in reversed(traceback.extract_tb(e.__traceback__)):
        path = os.path.abspath(fs.filename)
        if path.startswith(_SDK_DIR + os.sep) or path.startswith(_GRPC_DIR + os.sep):
            continue
        out.append(f"{fs.name} {os.path.basename(fs.filename)}:{fs.lineno}")
        if len(out) == limit:
            break
    return out


class TaskServicer(pb_grpc.TaskServicer):
    def __init__(self, task: Task, name: str, log: logging.Logger) -> None:
        self.task = task
        self.name = name
        self.log = log

    # ---- errors ----

    def _abort(self, context: grpc.ServicerContext, call: str, e: BaseException) -> NoReturn:
        """Turns a handler's exception into a gRPC status a person can act on."""
        if isinstance(e, InvalidArgument):
            code = grpc.StatusCode.INVALID_ARGUMENT
        elif isinstance(e, NotFound):
            code = grpc.StatusCode.NOT_FOUND
        elif isinstance(e, NotConfigured):
            code = grpc.StatusCode.FAILED_PRECONDITION
        elif isinstance(e, NotImplementedError):
            code = grpc.StatusCode.UNIMPLEMENTED
        else:
            code = grpc.StatusCode.INTERNAL
        if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNIMPLEMENTED):
            msg = f"{call}: the handler of python task {self.name!r} raised {type(e).__name__}: {e}"
            self.log.error(msg, exc_info=(type(e), e, e.__traceback__))
            frames = plugin_frames(e)
            if frames:
                msg += " (at " + " <- ".join(frames) + ")"
            msg = " ".join(msg.split("\n"))  # one line: the host's errors end a run in one
        else:
            msg = f"{call}: {e}"
        context.abort(code, msg)
        raise AssertionError("unreachable")  # context.abort raises

    def _run(self, context: grpc.ServicerContext, call: str, f: Callable[[], T]) -> T:
        try:
            return f()
        except Exception as e:  # mapped to a status; abort raises
            self._abort(context, call, e)

    def _handler(self, name: str) -> Any:
        h = getattr(self.task, name, None)
        return h if callable(h) else None

    def _env(self, context: grpc.ServicerContext) -> None:
        if not all(self._handler(m) for m in ("start", "obs", "end")):
            context.abort(
                grpc.StatusCode.UNIMPLEMENTED,
                "this task has no environment (start/obs/end); use single_turn_agent",
            )

    # ---- RPCs ----

    def Info(self, request: pb.InfoRequest, context: grpc.ServicerContext) -> pb.InfoResponse:
        def run() -> pb.InfoResponse:
            info = self.task.info()
            info.features = features(self.task, list(info.features))
            info.protocol_minor = PROTOCOL_MINOR
            return cv.info_to_proto(info)

        return self._run(context, "Info", run)

    def Configure(self, request: pb.ConfigureRequest, context: grpc.ServicerContext) -> pb.ConfigureResponse:
        try:
            cfg = cv.decode_object(request.config_json)
        except ValueError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Configure: config_json: {e}")
        use_host = self._handler("use_host")
        if use_host is not None:
            hs = request.host_service
            h = Host(hs.address, hs.token, hs.features)
            old, self.host = getattr(self, "host", None), h
            if old is not None:
                old.close()
            try:
                use_host(h)
            except Exception as e:  # noqa: BLE001 - reported as the call's status
                self._abort(context, "Configure", e)
        configure = self._handler("configure")
        if configure is None:
            if cfg:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Configure: this task takes no configuration, got keys [{' '.join(sorted(cfg))}]",
                )
            return pb.ConfigureResponse()
        try:
            configure(cfg)
        except (InvalidArgument, NotFound) as e:
            self._abort(context, "Configure", e)
        except Exception as e:  # a config the task cannot take is the caller's to fix
            self._abort(context, "Configure", InvalidArgument(f"{type(e).__name__}: {e}"))
        return pb.ConfigureResponse()

    def Preprocess(
        self, request_iterator: Iterator[pb.PreprocessRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.PreprocessResponse]:
        preprocess = self._handler("preprocess")
        if preprocess is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Preprocess: this task has no preprocessor")
        for req in request_iterator:
            where = f"Preprocess: record {req.index} of split {req.split!r}"
            try:
                data = cv.decode_object(req.record_json)
            except ValueError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{where}: {e}")
            resp = pb.PreprocessResponse(index=req.index)
            try:
                row = preprocess(Record(index=req.index, split=req.split, data=data))
            except Skip as s:
                resp.skip_reason = s.reason or "skipped"
            except Exception as e:
                self._abort(context, where, e)
            else:
                resp.row.CopyFrom(cv.row_to_proto(row))
            yield resp

    def Prompt(self, request: pb.PromptRequest, context: grpc.ServicerContext) -> pb.PromptResponse:
        def run() -> pb.PromptResponse:
            row = cv.row_from_proto(request.row if request.HasField("row") else None)
            prompt = self._handler("prompt")
            p = prompt(row) if prompt is not None else Prompt(messages=row.prompt, tools=self.task.info().tools)
            return pb.PromptResponse(
                messages=cv.messages_to_proto(p.messages),
                tools=cv.tools_to_proto(p.tools),
                hints=pb.SamplingHints(max_tokens=p.max_tokens, stop=list(p.stop)),
            )

        return self._run(context, "Prompt", run)

    def Start(self, request: pb.StartRequest, context: grpc.ServicerContext) -> pb.StartResponse:
        self._env(context)

        def run() -> pb.StartResponse:
            row = cv.row_from_proto(request.row if request.HasField("row") else None)
            r = self.task.start(  # type: ignore[attr-defined]
                StartRequest(
                    row=row,
                    trajectory_id=request.trajectory_id,
                    step=request.step,
                    rollout_n=request.rollout_n,
                    validate=request.validate,
                    endpoint_base_url=request.endpoint_base_url,
                    endpoint_api_key=request.endpoint_api_key,
                )
            )
            return pb.StartResponse(
                instance_id=r.instance_id, messages=cv.messages_to_proto(r.messages), lease_seconds=int(r.lease_seconds)
            )

        return self._run(context, "Start", run)

    def Obs(self, request: pb.ObsRequest, context: grpc.ServicerContext) -> pb.ObsResponse:
        self._env(context)
        if request.instance_id == "":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Obs: instance_id is empty")
        if request.kind not in (ObsKind.TOOLS, ObsKind.INTERACTION):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Obs: kind {request.kind} is not tools or interaction")
        req = ObsRequest(
            instance_id=request.instance_id,
            assistant=cv.message_from_proto(request.assistant),
            kind=ObsKind(request.kind),
            turn=request.turn,
            history=cv.messages_from_proto(request.history),
        )
        return self._run(context, "Obs", lambda: cv.obs_to_proto(self.task.obs(req)))  # type: ignore[attr-defined]

    def End(self, request: pb.EndRequest, context: grpc.ServicerContext) -> pb.EndResponse:
        self._env(context)
        if request.instance_id == "":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "End: instance_id is empty")
        req = EndRequest(instance_id=request.instance_id, aborted=request.aborted)
        return self._run(context, "End", lambda: cv.end_to_proto(self.task.end(req)))  # type: ignore[attr-defined]

    def Score(self, request: pb.ScoreRequest, context: grpc.ServicerContext) -> pb.ScoreResponse:
        items: List[ScoreItem] = []
        for i, it in enumerate(request.items):
            try:
                gt = cv.decode_json(it.ground_truth_json)
            except ValueError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Score: item {i}: ground_truth_json: {e}")
            try:
                extra = cv.decode_object(it.extra_info_json)
            except ValueError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"Score: item {i}: extra_info_json: {e}")
            items.append(ScoreItem(data_source=it.data_source, solution_str=it.solution_str, ground_truth=gt, extra_info=extra))
        def run() -> pb.ScoreResponse:
            res: List[ScoreResult] = list(self.task.score(items))
            if len(res) != len(items):
                raise ValueError(f"score returned {len(res)} results for {len(items)} items")
            return pb.ScoreResponse(
                results=[
                    pb.ScoreResult(
                        score=float(r.score),
                        components={k: float(v) for k, v in r.components.items()},
                        extra_json=cv.encode_json(r.extra),
                        error=r.error,
                    )
                    for r in res
                ]
            )

        return self._run(context, "Score", run)
