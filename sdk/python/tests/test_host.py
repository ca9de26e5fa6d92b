"""The Host service from the plugin's side: use_host declares host_service, Configure hands the
task a Host, and judge without a judge in the run raises NoHostCall before any call."""

from concurrent import futures

import grpc
import pytest

import rlhost
from rlhost._gen.task.v1 import task_pb2 as pb
from rlhost._gen.task.v1 import task_pb2_grpc as pb_grpc
from rlhost._server import TaskServicer
from rlhost.log import logger


class Judged(rlhost.Task):
    def __init__(self):
        self.host = None

    def use_host(self, host):
        self.host = host

    def info(self):
        return rlhost.Info(name="judged", version="1", samples=[rlhost.Sample(row=rlhost.Row(data_source="d"))])

    def score(self, items):
        return [rlhost.ScoreResult() for _ in items]


def test_use_host():
    task = Judged()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_TaskServicer_to_server(TaskServicer(task, "judged", logger("judged")), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        stub = pb_grpc.TaskStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        info = stub.Info(pb.InfoRequest())
        assert rlhost.FEATURE_HOST_SERVICE in info.features and info.protocol_minor == 1
        # A run without a judge: the service is there, the judge call is not offered.
        stub.Configure(pb.ConfigureRequest(config_json="{}", host_service=pb.HostService(address="unix:///nonexistent/host.sock", token="t")))
        assert task.host is not None and not task.host.has(rlhost.HOST_FEATURE_JUDGE)
        with pytest.raises(rlhost.NoHostCall, match="reward_model.judge.backend"):
            task.host.judge([rlhost.Message("user", "hi")])
        # Configure again (a restart): a new Host, with the judge offered.
        stub.Configure(pb.ConfigureRequest(host_service=pb.HostService(address="unix:///nonexistent/host.sock", token="t", features=["judge"])))
        assert task.host.has(rlhost.HOST_FEATURE_JUDGE)
    finally:
        server.stop(None)
