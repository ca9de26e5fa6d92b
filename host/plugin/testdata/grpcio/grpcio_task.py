"""A score-only task plugin written from docs/protocol.md and task.proto alone: stock grpcio
(with grpcio-health-checking) serving TLS with grpc.ssl_server_credentials, the host's
PLUGIN_CLIENT_CERT as the only trusted client CA, and no rlhost SDK.

It declares only the "score" feature, so it serves Info and Score of the task service, the
health service and go-plugin's controller, and nothing else: the host calls no other RPC.
The stubs (task/v1/task_pb2*.py) are generated from sdk/proto by grpc_tools.protoc and found
on PYTHONPATH.
"""

import base64
import datetime
import json
import os
import sys
import tempfile
import threading
from concurrent import futures

# gRPC's C core writes its own lines to stderr, which the host reads as hclog JSON: silence it
# before grpc is imported. (GRPCIO_TASK_VERBOSITY lets the tests show what happens otherwise.)
os.environ["GRPC_VERBOSITY"] = os.environ.get("GRPCIO_TASK_VERBOSITY", "NONE")

import grpc  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # noqa: E402

from task.v1 import task_pb2, task_pb2_grpc  # noqa: E402

COOKIE_KEY, COOKIE_VALUE = "RLHOST_PLUGIN_COOKIE", "d8f0a7c4e2b94f6d9a1c3e5b7f2d4a6c-rlhost"


def log(level, msg, **kv):
    """One hclog JSON line on stderr."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
    sys.stderr.write(json.dumps({"@level": level, "@message": msg, "@timestamp": now, **kv}) + "\n")
    sys.stderr.flush()


def server_cert():
    """A fresh self-signed ECDSA P-256 certificate for "localhost": (cert PEM, key PEM, DER)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem, cert.public_bytes(serialization.Encoding.DER)


class Task(task_pb2_grpc.TaskServicer):
    """Scores 1 when the answer after "####" equals the ground truth, else 0."""

    def Info(self, request, context):
        row = task_pb2.Row(
            data_source="grpcio",
            prompt=[task_pb2.Message(role="user", content="What is 3 + 4? End with #### N.")],
            reward_model=task_pb2.RewardModel(style="rule", ground_truth_json='"7"'),
            extra_info_json='{"index": 0}',
        )
        return task_pb2.InfoResponse(
            name="grpcio", version="0.1.0", features=["score"], data_sources=["grpcio"],
            samples=[task_pb2.Sample(split="train", row=row, reference_solution="3 + 4 = 7. #### 7")],
        )

    def Score(self, request, context):
        out = []
        for item in request.items:
            try:
                truth = json.loads(item.ground_truth_json)
            except ValueError:
                out.append(task_pb2.ScoreResult(error="ground_truth_json is not JSON"))
                continue
            answer = item.solution_str.rsplit("####", 1)[-1].strip() if "####" in item.solution_str else None
            out.append(task_pb2.ScoreResult(score=1.0 if answer == str(truth) else 0.0))
        return task_pb2.ScoreResponse(results=out)


def main():
    if os.environ.get(COOKIE_KEY) != COOKIE_VALUE:
        sys.stderr.write("rlhost-task-grpcio is an rlhost task plugin: rlhost starts it; it is not run by hand.\n")
        sys.exit(1)
    # It speaks task protocol 1 only; offered none of PLUGIN_PROTOCOL_VERSIONS, it still answers
    # 1 and the host refuses it with "speaks another protocol version".
    version = 1
    client_ca = os.environ.get("PLUGIN_CLIENT_CERT", "").encode()
    if not client_ca:
        log("error", "PLUGIN_CLIENT_CERT is not set: the host always sends its certificate")
        sys.exit(1)

    stop = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    task_pb2_grpc.add_TaskServicer_to_server(Task(), server)
    hs = health.HealthServicer()
    hs.set("plugin", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)

    def shutdown(_request, _context):
        stop.set()
        return b""

    # go-plugin's plugin.GRPCController/Shutdown(google.protobuf.Empty): empty bytes both ways.
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("plugin.GRPCController", {
        "Shutdown": grpc.unary_unary_rpc_method_handler(shutdown, lambda b: b, lambda b: b)}),))

    cert_pem, key_pem, cert_der = server_cert()
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=client_ca, require_client_auth=True)
    sock_dir = os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or tempfile.gettempdir()
    path = os.path.join(sock_dir, "plugin-grpcio-%d" % os.getpid())
    server.add_secure_port("unix:" + path, creds)
    server.start()
    log("debug", "serving", address=path, tls=True)

    cert_field = base64.b64encode(cert_der).decode().rstrip("=")
    sys.stdout.write("1|%d|unix|%s|grpc|%s\n" % (version, path, cert_field))
    sys.stdout.flush()
    stop.wait()
    log("debug", "shutting down")
    server.stop(grace=0.2).wait(1.0)
    try:
        os.unlink(path)
    except OSError:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
