"""A real S3-compatible server for tests: moto's, in this process's threads, on a free localhost port.

mamba-tune reaches it as it reaches any S3-compatible store, through the environment (env()): AWS_ENDPOINT_URL and
the access keys. Files are put there with pyarrow's own S3FileSystem, which may create the bucket.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow.fs as pafs
from moto import settings as moto_settings
from moto.server import ThreadedMotoServer

from tests.cli import free_port

BUCKET = "bars-bucket"
REGION = "us-east-1"
KEY_ID, SECRET = "test-key-id", "test-secret"  # moto takes any, until require_signed_keys() is on


class S3Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        self.server.start()
        self.filesystem().create_dir(BUCKET)
        return self

    def stop(self) -> None:
        self.server.stop()

    def env(self, key_id: str = KEY_ID, secret: str = SECRET) -> dict[str, str]:
        """The environment a client of this server reads its endpoint and credentials from."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
                "AWS_DEFAULT_REGION": REGION, "AWS_EC2_METADATA_DISABLED": "true"}

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(access_key=KEY_ID, secret_key=SECRET, region=REGION, endpoint_override=self.endpoint,
                                 allow_bucket_creation=True)

    def put(self, source: Path | bytes, key: str) -> str:
        """Upload a local file (or bytes) as BUCKET/key; -> its s3:// URI."""
        data = source if isinstance(source, bytes) else source.read_bytes()
        with self.filesystem().open_output_stream(f"{BUCKET}/{key}") as stream:
            stream.write(data)
        return f"s3://{BUCKET}/{key}"


@contextlib.contextmanager
def require_signed_keys() -> Iterator[None]:
    """While open, the server checks every request's access key as AWS does: a key it never issued is denied."""
    saved = moto_settings.INITIAL_NO_AUTH_ACTION_COUNT
    moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    try:
        yield
    finally:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = saved
