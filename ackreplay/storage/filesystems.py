"""Input files where users keep them: local or mounted folders, and S3-compatible object stores.

The input files are read in Python (the listing on the driver, the lines in the reading tasks) with pyarrow's
filesystems, and the lakehouse through Spark's Hadoop filesystems (Delta). One set of settings serves both: an
`s3a://` (or `s3://`) input is opened with pyarrow's S3 client configured from the session's Hadoop S3A settings
(`spark.hadoop.fs.s3a.*` in the conf, or core-site.xml), per bucket where `fs.s3a.bucket.<bucket>.<key>` is set,
as Hadoop's `S3AUtils.propagateBucketOptions` does. Without keys, both fall back to the AWS default credential
chain (environment, profile, instance role).

Other schemes (`abfss://`, `gs://`, `hdfs://`) are refused with a message rather than handed to pyarrow, whose
Azure client ends the process when it finds no credential. Mounted paths (Databricks `/Volumes`, `/dbfs`) are
local folders here.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from pyarrow import fs as pafs

from ackreplay.session import is_connect

S3_SCHEMES = frozenset({"s3a", "s3", "s3n"})
LOCAL_SCHEMES = frozenset({"", "file"})
# The Hadoop S3A keys mapped to pyarrow's S3 client (org.apache.hadoop.fs.s3a.Constants).
_S3A_KEYS = (
    "endpoint",
    "endpoint.region",
    "access.key",
    "secret.key",
    "session.token",
    "path.style.access",
    "connection.ssl.enabled",
    "aws.credentials.provider",
)
_ANONYMOUS_PROVIDER = "AnonymousAWSCredentialsProvider"


class UnsupportedInputLocation(ValueError):
    """An input URI whose scheme the readers cannot open."""


def scheme_of(uri: str) -> str:
    """`s3a` of `s3a://bucket/key`; "" for a plain path (a Windows drive letter is not a scheme)."""
    scheme = urlsplit(uri).scheme
    return "" if len(scheme) <= 1 else scheme.lower()


def s3a_settings(spark) -> dict[str, str]:
    """The session's Hadoop `fs.s3a.*` settings (names without the `spark.hadoop.` prefix): from the driver's
    Hadoop configuration on a classic session (core-site.xml included), from the session's conf on Spark
    Connect, which has no driver JVM here."""
    if not is_connect(spark):
        props = spark.sparkContext._jsc.hadoopConfiguration().getPropsWithPrefix("fs.s3a.")
        return {f"fs.s3a.{key}": str(props.get(key)) for key in props.keySet()}
    prefix = "spark.hadoop."
    return {k[len(prefix) :]: v for k, v in spark.conf.getAll.items() if k.startswith(prefix + "fs.s3a.")}


def _bucket_setting(settings: Mapping[str, str], bucket: str, key: str) -> str | None:
    value = settings.get(f"fs.s3a.bucket.{bucket}.{key}")
    return value if value is not None else settings.get(f"fs.s3a.{key}")


def s3_filesystem(bucket: str, settings: Mapping[str, str]) -> pafs.S3FileSystem:
    """pyarrow's S3 client for `bucket`, configured as Hadoop's S3A would be from the same settings."""

    def get(key: str) -> str | None:
        value = _bucket_setting(settings, bucket, key)
        return value.strip() if value is not None and value.strip() else None

    options: dict = {}
    endpoint = get("endpoint")
    ssl = (get("connection.ssl.enabled") or "true").lower() != "false"
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"{'https' if ssl else 'http'}://{endpoint}")
        options["endpoint_override"] = parts.netloc
        options["scheme"] = parts.scheme
        # S3A addresses buckets by host name unless path style is asked for; pyarrow uses the path with an
        # endpoint override unless told otherwise
        options["force_virtual_addressing"] = (get("path.style.access") or "false").lower() != "true"
    region = get("endpoint.region")
    if region:
        options["region"] = region
    if _ANONYMOUS_PROVIDER in (get("aws.credentials.provider") or ""):
        options["anonymous"] = True
    elif get("access.key") and get("secret.key"):
        options["access_key"] = get("access.key")
        options["secret_key"] = get("secret.key")
        if get("session.token"):
            options["session_token"] = get("session.token")
    return pafs.S3FileSystem(**options)


def open_uri(uri: str, settings: Mapping[str, str] | None = None) -> tuple[pafs.FileSystem, str]:
    """The filesystem holding `uri` and the path to pass it: a local path, `file:` URI or S3 object URI."""
    scheme = scheme_of(uri)
    if scheme in LOCAL_SCHEMES:
        return pafs.LocalFileSystem(), urlsplit(uri).path if scheme == "file" else uri
    if scheme in S3_SCHEMES:
        parts = urlsplit(uri)
        if not parts.netloc:
            raise UnsupportedInputLocation(f"{uri} names no bucket: expected {scheme}://<bucket>/<path>")
        return s3_filesystem(parts.netloc, settings or {}), f"{parts.netloc}{parts.path}".rstrip("/")
    raise UnsupportedInputLocation(
        f"input files on {scheme}:// cannot be read: ackreplay reads its input from local or mounted folders "
        f"and from S3-compatible object stores (s3a://, s3://); copy or mount the files (the lakehouse may be on "
        f"any filesystem Spark has a connector for)"
    )


def uri_of(scheme: str, path: str) -> str:
    """The URI of a path `open_uri` returned, in the scheme the user gave."""
    return path if scheme in LOCAL_SCHEMES else f"{scheme}://{path}"
