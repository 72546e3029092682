"""S3-compatible object storage for the tests: moto's S3 server on this machine (PyPI
`moto[server]`), and this test process's storages on its bucket."""

from __future__ import annotations

import urllib.request

import boto3
import pytest
from moto.server import ThreadedMotoServer

from config.embedded_redis import free_port

BUCKET = "parley-test"
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def s3_options(endpoint: str, **more) -> dict:
    from botocore.config import Config

    return {
        "bucket_name": BUCKET,
        "endpoint_url": endpoint,
        "region_name": "us-east-1",
        "client_config": Config(signature_version="s3v4", s3={"addressing_style": "path"}),
        "default_acl": None,
        **more,
    }


@pytest.fixture
def s3(monkeypatch):
    """moto's S3 server on a free port, with an empty bucket; its endpoint."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    # moto keeps its buckets in this process, whichever server object serves them: start empty.
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"))
    for key, value in KEYS.items():
        monkeypatch.setenv(key, value)
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


@pytest.fixture
def on_s3(s3, settings):
    """This test process's storages on the bucket, as the processes' are."""
    backend = "storages.backends.s3.S3Storage"
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": backend, "OPTIONS": s3_options(s3)},
        "imports": {"BACKEND": backend, "OPTIONS": s3_options(s3)},
        "workspace": {
            "BACKEND": backend,
            "OPTIONS": s3_options(s3, location="workspaces", file_overwrite=True),
        },
    }  # (Django's setting_changed signal makes the storage objects again)
    return s3
