"""An S3-compatible object store on 127.0.0.1 (moto's server, in a process of its own, stopped by
PID), with a bucket whose storage options are registered for `s3://lake`."""
from __future__ import annotations

import subprocess
import sys
import time
from typing import Iterator

import boto3  # tests/requirements-test.txt
import pytest

from streamjoin.processes import free_port, listening
from streamjoin.storage import filesystem

BUCKET = "lake"


@pytest.fixture(scope="session")
def s3_lake() -> Iterator[str]:
    """The URI of an empty bucket on a local S3 emulator, its storage options registered."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not listening(port):
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the S3 emulator (moto) did not start")
            time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                   "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        filesystem.register(f"s3://{BUCKET}", options)
        yield f"s3://{BUCKET}"
    finally:
        server.terminate()
        server.wait(timeout=30)
