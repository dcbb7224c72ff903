"""Input URIs mapped to pyarrow filesystems from Hadoop's S3A settings (ackreplay/storage/filesystems.py)."""

from __future__ import annotations

import socket

import pytest
from pyarrow import fs as pafs

from ackreplay.storage.filesystems import open_uri, s3_filesystem, scheme_of
from ackreplay.storage.inputs import InputError, discover_inputs


def _options(filesystem: pafs.S3FileSystem) -> dict:
    (options,) = filesystem.__reduce__()[1]
    keys = ("access_key", "secret_key", "session_token", "anonymous", "region", "scheme", "endpoint_override")
    return {k: options[k] for k in (*keys, "force_virtual_addressing")}


@pytest.mark.parametrize(
    "uri, scheme",
    [("s3a://lake/logs", "s3a"), ("S3://lake", "s3"), ("/data/logs", ""), ("logs", ""), ("file:///data", "file"),
     ("C:\\logs", ""), ("abfss://c@acct.dfs.core.windows.net/x", "abfss")],
)  # fmt: skip
def test_scheme_of(uri, scheme):
    assert scheme_of(uri) == scheme


def test_local_paths_and_file_uris_open_on_the_local_filesystem():
    filesystem, path = open_uri("file:///data/logs")
    assert isinstance(filesystem, pafs.LocalFileSystem) and path == "/data/logs"
    filesystem, path = open_uri("relative/logs")
    assert isinstance(filesystem, pafs.LocalFileSystem) and path == "relative/logs"


def test_s3a_settings_configure_pyarrows_client_with_per_bucket_overrides():
    settings = {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.access.key": "key",
        "fs.s3a.secret.key": "secret",
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.bucket.lake.endpoint.region": "eu-west-1",
        "fs.s3a.bucket.lake.session.token": "token",
    }
    filesystem, path = open_uri("s3a://lake/logs/cluster-a/", settings)
    assert path == "lake/logs/cluster-a"
    assert _options(filesystem) == {
        "access_key": "key", "secret_key": "secret", "session_token": "token", "anonymous": False,
        "region": "eu-west-1", "scheme": "http", "endpoint_override": "127.0.0.1:9000",
        "force_virtual_addressing": False,
    }  # fmt: skip
    other = _options(s3_filesystem("other", settings))
    assert (other["region"], other["session_token"]) == ("us-east-1", "")


def test_an_endpoint_without_a_scheme_follows_ssl_and_virtual_hosts_unless_path_style():
    options = _options(s3_filesystem("b", {"fs.s3a.endpoint": "minio.internal:9000"}))
    assert (options["scheme"], options["endpoint_override"], options["force_virtual_addressing"]) == (
        "https", "minio.internal:9000", True,
    )  # fmt: skip
    options = _options(s3_filesystem("b", {"fs.s3a.endpoint": "minio:9000", "fs.s3a.connection.ssl.enabled": "false"}))
    assert options["scheme"] == "http"


def test_anonymous_credentials_provider():
    provider = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
    options = _options(s3_filesystem("b", {"fs.s3a.aws.credentials.provider": provider, "fs.s3a.access.key": "k"}))
    assert options["anonymous"] is True and not options["access_key"]


@pytest.mark.parametrize("uri", ["abfss://c@acct.dfs.core.windows.net/logs", "gs://bucket/logs", "hdfs://nn/logs"])
def test_inputs_on_other_stores_are_refused_with_the_reason(uri):
    with pytest.raises(InputError, match=r"cannot be read: ackreplay reads its input from local or mounted folders"):
        discover_inputs(uri)


def test_an_s3_bucket_without_a_name_is_refused():
    with pytest.raises(InputError, match=r"s3a:///logs names no bucket"):
        discover_inputs("s3a:///logs")


def test_an_unreachable_object_store_is_an_input_error_naming_the_folder():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = {"fs.s3a.endpoint": f"http://127.0.0.1:{port}", "fs.s3a.access.key": "k", "fs.s3a.secret.key": "s"}
    with pytest.raises(InputError, match=r"^cannot list input folder s3a://logs/traces: .*NETWORK_CONNECTION"):
        discover_inputs("s3a://logs/traces", settings)
