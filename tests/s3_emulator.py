"""An S3-compatible object store on 127.0.0.1: moto's server in a process of its own, stopped by PID
(installed from tests/requirements-test.txt)."""
from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import boto3

from streamjoin.processes import HOST, free_port, listening


@dataclass(frozen=True)
class Bucket:
    """A bucket on the emulator: its URI and the storage options that reach it."""

    uri: str
    options: dict[str, str]


@contextmanager
def s3_bucket(name: str = "lake") -> Iterator[Bucket]:
    """An emulator with one empty bucket, for the block."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not listening(port):
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the S3 emulator (moto) did not start")
            time.sleep(0.1)
        endpoint = f"http://{HOST}:{port}"
        options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                   "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                     region_name="us-east-1").create_bucket(Bucket=name)
        yield Bucket(f"s3://{name}", options)
    finally:
        server.terminate()
        server.wait(timeout=30)
