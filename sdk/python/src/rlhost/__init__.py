"""rlhost: write rlhost task plugins in Python.

A task plugin is a Task subclass served by serve() from an executable named rlhost-task-NAME:

    import rlhost

    class MyTask(rlhost.Task):
        def info(self):
            return rlhost.Info(name="my", version="0.1.0", samples=[...])

        def score(self, items):
            return [rlhost.ScoreResult(score=1.0, components={"accuracy": 1.0}) for it in items]

    if __name__ == "__main__":
        rlhost.serve(MyTask())

It speaks the same protocol as Go plugins (sdk/proto/task/v1/task.proto) with go-plugin's
handshake, and passes the same conformance kit (`rlhost conformance PATH`).
"""

from rlhost.errors import InvalidArgument, NotConfigured, NotFound, Skip, TaskError
from rlhost.host import FEATURE_HOST_SERVICE, HOST_FEATURE_JUDGE, Host, JudgeResult, NoHostCall
from rlhost.log import logger
from rlhost.serve import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE, serve
from rlhost.task import Task
from rlhost.toolenv import (
    Interaction,
    InteractionReply,
    InteractionTurn,
    Tool,
    ToolEnv,
    ToolInvocation,
    ToolOutput,
    schema_object,
)
from rlhost.types import *  # noqa: F401,F403
from rlhost.types import __all__ as _types_all

__version__ = "0.1.0"

__all__ = [
    "InvalidArgument",
    "NotConfigured",
    "NotFound",
    "Skip",
    "TaskError",
    "FEATURE_HOST_SERVICE",
    "HOST_FEATURE_JUDGE",
    "Host",
    "JudgeResult",
    "NoHostCall",
    "logger",
    "serve",
    "MAGIC_COOKIE_KEY",
    "MAGIC_COOKIE_VALUE",
    "Task",
    "Interaction",
    "InteractionReply",
    "InteractionTurn",
    "Tool",
    "ToolEnv",
    "ToolInvocation",
    "ToolOutput",
    "schema_object",
] + list(_types_all)
