"""serve(task): go-plugin's handshake for a plugin that is not written in Go (docs/protocol.md).

1. Without RLHOST_PLUGIN_COOKIE set to the magic value, say why on stderr and exit 1.
2. Pick the highest of PLUGIN_PROTOCOL_VERSIONS this SDK speaks (else answer with our own, and
   the host refuses it).
3. Listen on a Unix socket in PLUGIN_UNIX_SOCKET_DIR (or the temp dir); with
   PLUGIN_CLIENT_CERT (the host's one-time CA) serve gRPC's own TLS with a fresh self-signed
   certificate and require a client certificate signed by that CA (docs/protocol.md, Mutual TLS).
4. Serve the task service, grpc.health.v1 with service "plugin" SERVING, go-plugin's
   plugin.GRPCController/Shutdown and an empty plugin.GRPCStdio/StreamStdio.
5. Print CORE|APP|unix|ADDRESS|grpc|CERT on stdout, and nothing else ever: after it, what the
   task prints goes to the log (stream=stdout).
"""

from __future__ import annotations

import base64
import datetime
import os
import signal
import sys
import tempfile
import threading
from concurrent import futures
from typing import Iterator, Optional, Tuple

MAGIC_COOKIE_KEY = "RLHOST_PLUGIN_COOKIE"
MAGIC_COOKIE_VALUE = "d8f0a7c4e2b94f6d9a1c3e5b7f2d4a6c-rlhost"
CORE_PROTOCOL_VERSION = 1
# The task protocol major versions this SDK speaks.
TASK_PROTOCOL_MAJORS = (1,)

# gRPC's C core logs to stderr, which must carry hclog JSON only: keep it to errors unless the
# user asked for more. Set before grpc is imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # noqa: E402

from rlhost._gen.task.v1 import task_pb2_grpc  # noqa: E402
from rlhost._server import TaskServicer  # noqa: E402
from rlhost.log import LogWriter, logger, plugin_name  # noqa: E402
from rlhost.task import Task  # noqa: E402


def negotiate(offered: str, speaks: Tuple[int, ...] = TASK_PROTOCOL_MAJORS) -> int:
    """The highest of the comma-separated versions offered that we speak; our highest if none."""
    best = 0
    for part in offered.split(","):
        part = part.strip()
        if part.isdigit() and int(part) in speaks:
            best = max(best, int(part))
    return best or max(speaks)


def self_signed_cert() -> Tuple[bytes, bytes, bytes]:
    """A fresh self-signed ECDSA P-256 certificate for "localhost", the plugin's side of the
    mutual TLS: returns (certificate PEM, private key PEM, certificate DER)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, "localhost"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "rlhost")]
    )
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(seconds=30))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=True,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem, cert.public_bytes(serialization.Encoding.DER)


def _socket_path(directory: str) -> str:
    fd, path = tempfile.mkstemp(prefix="plugin", dir=directory)
    os.close(fd)
    os.unlink(path)  # the listener creates the socket at this name
    return path


def _refuse() -> None:
    prog = os.environ.get("RLHOST_PLUGIN_EXECUTABLE") or (sys.argv[0] if sys.argv and sys.argv[0] else "this plugin")
    sys.stderr.write(
        f"{prog} is an rlhost task plugin: it is started by rlhost, not run by hand.\n"
        "Install it in ./bin/plugins, ~/.rlhost/plugins or a directory on RLHOST_PLUGIN_PATH, then\n"
        f"  rlhost plugins list\n  rlhost conformance {prog}\n"
    )
    sys.stderr.flush()
    sys.exit(1)


def _controller_handler(stop: threading.Event) -> grpc.GenericRpcHandler:
    """go-plugin's plugin.GRPCController: Shutdown(Empty) returns (Empty). The Empty message
    has no fields, so requests and responses are empty bytes."""

    def shutdown(_req: bytes, _ctx: grpc.ServicerContext) -> bytes:
        stop.set()
        return b""

    return grpc.method_handlers_generic_handler(
        "plugin.GRPCController",
        {
            "Shutdown": grpc.unary_unary_rpc_method_handler(
                shutdown, request_deserializer=lambda b: b, response_serializer=lambda b: b
            )
        },
    )


def _stdio_handler() -> grpc.GenericRpcHandler:
    """go-plugin's plugin.GRPCStdio/StreamStdio: the host would copy the plugin's stdout and
    stderr from it. A Python plugin logs to stderr directly, so the stream ends at once."""

    def stream(_req: bytes, _ctx: grpc.ServicerContext) -> Iterator[bytes]:
        return iter(())

    return grpc.method_handlers_generic_handler(
        "plugin.GRPCStdio",
        {
            "StreamStdio": grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=lambda b: b, response_serializer=lambda b: b
            )
        },
    )


def serve(task: Task, *, max_workers: int = 32, name: Optional[str] = None) -> None:
    """Runs task as an rlhost task plugin until the host shuts it down. Call it from main:

    if __name__ == "__main__":
        rlhost.serve(MyTask())
    """
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        _refuse()
    name = name or plugin_name()
    log = logger(name)
    app = negotiate(os.environ.get("PLUGIN_PROTOCOL_VERSIONS", ""))

    stop = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="rlhost-rpc"))
    task_pb2_grpc.add_TaskServicer_to_server(TaskServicer(task, name, log), server)
    hs = health.HealthServicer()
    hs.set("plugin", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(hs, server)
    server.add_generic_rpc_handlers((_controller_handler(stop), _stdio_handler()))

    sock_dir = os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or tempfile.gettempdir()
    path = _socket_path(sock_dir)
    cert_field = ""
    client_ca = os.environ.get("PLUGIN_CLIENT_CERT", "")
    if client_ca:
        # Mutual TLS with gRPC's own TLS: the host's client certificate (ECDSA P-256) must be
        # signed by PLUGIN_CLIENT_CERT; the host verifies ours as "localhost".
        cert_pem, key_pem, cert_der = self_signed_cert()
        creds = grpc.ssl_server_credentials(
            [(key_pem, cert_pem)], root_certificates=client_ca.encode(), require_client_auth=True
        )
        server.add_secure_port("unix:" + path, creds)
        cert_field = base64.b64encode(cert_der).decode().rstrip("=")
    else:
        server.add_insecure_port("unix:" + path)
    server.start()

    # go-plugin's own servers ignore SIGINT (a Ctrl-C at the host's terminal reaches the whole
    # process group; the host decides); SIGTERM stops gracefully.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, lambda *_: stop.set())

    log.debug("plugin address", extra={"network": "unix", "address": path, "protocol": app, "tls": bool(client_ca)})
    sys.stdout.write(f"{CORE_PROTOCOL_VERSION}|{app}|unix|{path}|grpc|{cert_field}\n")
    sys.stdout.flush()
    # From now on stdout is the host's to ignore: print() goes to the log instead.
    sys.stdout = LogWriter(log)  # type: ignore[assignment]

    stop.wait()
    log.debug("shutting down")
    server.stop(grace=0.5).wait(1.0)
    try:
        os.unlink(path)
    except OSError:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    # Handler threads stuck in user code must not keep the process alive.
    os._exit(0)
