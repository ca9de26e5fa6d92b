"""The servicer over an in-process gRPC server: codes and messages the host relies on."""

import json
from concurrent import futures

import grpc
import pytest

import rlhost
from rlhost._convert import row_to_proto
from rlhost._gen.task.v1 import task_pb2 as pb
from rlhost._gen.task.v1 import task_pb2_grpc as pb_grpc
from rlhost._server import TaskServicer
from rlhost.log import logger


class Single(rlhost.Task):
    def info(self):
        return rlhost.Info(name="single", version="1", samples=[rlhost.Sample(row=rlhost.Row(data_source="d"))])

    def score(self, items):
        out = []
        for it in items:
            if it.solution_str == "raise":
                raise ValueError("scorer exploded")
            out.append(rlhost.ScoreResult(score=len(it.solution_str), components={"len": len(it.solution_str)}, extra={"gt": it.ground_truth}))
        return out


class Full(Single, rlhost.ToolEnv):
    def __init__(self):
        rlhost.ToolEnv.__init__(self, tools=[])

    def configure(self, config):
        if "bad" in config:
            raise rlhost.InvalidArgument("unknown key 'bad'")
        if "crash" in config:
            raise KeyError("crash")

    def preprocess(self, record):
        if record.data.get("skip"):
            raise rlhost.Skip("told to")
        if record.data.get("bad"):
            raise rlhost.InvalidArgument("no question")
        return rlhost.Row(data_source="d", prompt=[rlhost.Message("user", record.data["q"])])


@pytest.fixture(params=[Single, Full])
def stub(request):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_TaskServicer_to_server(TaskServicer(request.param(), "fixture", logger("fixture")), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield request.param, pb_grpc.TaskStub(ch)
    ch.close()
    server.stop(0)


def code(f):
    with pytest.raises(grpc.RpcError) as e:
        f()
    return e.value.code(), e.value.details()


def test_info_features(stub):
    cls, s = stub
    info = s.Info(pb.InfoRequest())
    want = ["score"] if cls is Single else ["configure", "environment", "preprocess", "score"]
    assert list(info.features) == want
    assert info.samples[0].row.data_source == "d"


def test_score_round_trip_and_handler_exception(stub):
    _, s = stub
    res = s.Score(pb.ScoreRequest(items=[pb.ScoreItem(solution_str="abc", ground_truth_json='"7"')]))
    assert res.results[0].score == 3 and dict(res.results[0].components) == {"len": 3.0}
    assert json.loads(res.results[0].extra_json) == {"gt": "7"}
    assert len(s.Score(pb.ScoreRequest()).results) == 0
    c, msg = code(lambda: s.Score(pb.ScoreRequest(items=[pb.ScoreItem(solution_str="raise")])))
    assert c == grpc.StatusCode.INTERNAL
    assert "Score" in msg and "'fixture'" in msg and "ValueError: scorer exploded" in msg
    # One line, with the plugin's own frames (here this file's), innermost first; not the SDK's.
    assert "\n" not in msg and "(at score test_server.py:" in msg and " _server.py:" not in msg and "(at run " not in msg, msg
    c, msg = code(lambda: s.Score(pb.ScoreRequest(items=[pb.ScoreItem(ground_truth_json="{")])))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "item 0: ground_truth_json" in msg
    c, msg = code(lambda: s.Score(pb.ScoreRequest(items=[pb.ScoreItem(extra_info_json="[]")])))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "want a JSON object, got an array" in msg


def test_prompt(stub):
    _, s = stub
    row = row_to_proto(rlhost.Row(data_source="d", prompt=[rlhost.Message("user", "hi")]))
    assert [m.content for m in s.Prompt(pb.PromptRequest(row=row)).messages] == ["hi"]
    row.extra_info_json = "[1]"
    c, msg = code(lambda: s.Prompt(pb.PromptRequest(row=row)))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "row.extra_info_json" in msg


def test_configure(stub):
    cls, s = stub
    s.Configure(pb.ConfigureRequest(config_json="{}"))
    s.Configure(pb.ConfigureRequest(config_json=""))
    c, msg = code(lambda: s.Configure(pb.ConfigureRequest(config_json='{"bad": 1}')))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "bad" in msg
    c, _ = code(lambda: s.Configure(pb.ConfigureRequest(config_json="nope")))
    assert c == grpc.StatusCode.INVALID_ARGUMENT
    if cls is Full:
        c, msg = code(lambda: s.Configure(pb.ConfigureRequest(config_json='{"crash": 1}')))
        assert c == grpc.StatusCode.INVALID_ARGUMENT and "KeyError" in msg


def test_environment_codes(stub):
    cls, s = stub
    if cls is Single:
        c, _ = code(lambda: s.Start(pb.StartRequest(row=pb.Row())))
        assert c == grpc.StatusCode.UNIMPLEMENTED
        c, _ = code(lambda: s.Preprocess(iter([pb.PreprocessRequest(record_json="{}")])).__next__())
        assert c == grpc.StatusCode.UNIMPLEMENTED
        return
    iid = s.Start(pb.StartRequest(row=pb.Row())).instance_id
    assert iid
    assert code(lambda: s.Obs(pb.ObsRequest(instance_id="", kind=1)))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert code(lambda: s.Obs(pb.ObsRequest(instance_id=iid, kind=77)))[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert code(lambda: s.Obs(pb.ObsRequest(instance_id="x", kind=1)))[0] == grpc.StatusCode.NOT_FOUND
    s.End(pb.EndRequest(instance_id=iid))
    assert code(lambda: s.End(pb.EndRequest(instance_id=iid)))[0] == grpc.StatusCode.NOT_FOUND
    assert code(lambda: s.End(pb.EndRequest(instance_id="")))[0] == grpc.StatusCode.INVALID_ARGUMENT


def test_preprocess_stream(stub):
    cls, s = stub
    if cls is Single:
        return
    reqs = [
        pb.PreprocessRequest(index=0, split="train", record_json='{"q": "a"}'),
        pb.PreprocessRequest(index=1, split="train", record_json='{"skip": true}'),
    ]
    out = list(s.Preprocess(iter(reqs)))
    assert out[0].index == 0 and out[0].row.prompt[0].content == "a"
    assert out[1].index == 1 and out[1].skip_reason == "told to" and not out[1].HasField("row")
    c, msg = code(lambda: list(s.Preprocess(iter([pb.PreprocessRequest(index=5, split="test", record_json='{"bad": 1}')]))))
    assert c == grpc.StatusCode.INVALID_ARGUMENT and "record 5 of split 'test'" in msg
    c, msg = code(lambda: list(s.Preprocess(iter([pb.PreprocessRequest(index=6, record_json="[]")]))))
    assert c == grpc.StatusCode.INVALID_ARGUMENT


class BadResults(rlhost.Task):
    """Returns what cannot go on the wire: the error names the handler, never a bare UNKNOWN."""

    def info(self):
        return rlhost.Info(name="bad", version="1")

    def score(self, items):
        if items and items[0].solution_str == "short":
            return []
        return [rlhost.ScoreResult(score=1, extra={"x": object()})]


def test_unencodable_results_are_internal_errors_naming_the_handler():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_TaskServicer_to_server(TaskServicer(BadResults(), "bad", logger("bad")), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        s = pb_grpc.TaskStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        c, msg = code(lambda: s.Score(pb.ScoreRequest(items=[pb.ScoreItem(solution_str="x")])))
        assert c == grpc.StatusCode.INTERNAL and "Score" in msg and "TypeError" in msg, msg
        c, msg = code(lambda: s.Score(pb.ScoreRequest(items=[pb.ScoreItem(solution_str="short")])))
        assert c == grpc.StatusCode.INTERNAL and "0 results for 1 items" in msg, msg
    finally:
        server.stop(0)


def grade(items):
    return [rlhost.ScoreResult(score=1.0 / len(it.solution_str)) for it in items]


class Divides(rlhost.Task):
    def info(self):
        return rlhost.Info(name="divides", version="1")

    def score(self, items):
        return grade(items)


def test_exception_message_names_the_plugin_frames():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_TaskServicer_to_server(TaskServicer(Divides(), "divides", logger("divides")), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        s = pb_grpc.TaskStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        c, msg = code(lambda: s.Score(pb.ScoreRequest(items=[pb.ScoreItem(solution_str="")])))
        assert c == grpc.StatusCode.INTERNAL, msg
        assert "raised ZeroDivisionError: float division by zero (at <listcomp> test_server.py:" in msg or \
            "raised ZeroDivisionError: float division by zero (at grade test_server.py:" in msg, msg
        assert " <- score test_server.py:" in msg and "\n" not in msg, msg
    finally:
        server.stop(0)
