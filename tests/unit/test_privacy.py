"""Pseudonymised identities: salted SHA-256, stable per salt, nulls kept, other columns untouched."""

from __future__ import annotations

import hashlib

import pytest
from chispa import assert_column_equality
from pyspark.sql import functions as F

from ackreplay.config import ConfigError, parse_config
from ackreplay.transforms.privacy import salted_sha256, with_hashed_identities
from tests.helpers import assert_df_equality


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_salted_sha256_matches_hashlib_and_keeps_null(spark):
    df = spark.createDataFrame(
        [("producer-1", _sha("s3cret:producer-1")), ("User:alice", _sha("s3cret:User:alice")), (None, None)],
        "value string, expected string",
    ).withColumn("value", salted_sha256(F.col("value"), "s3cret"))
    assert_column_equality(df, "value", "expected")


def test_identity_columns_are_hashed_and_the_rest_kept(spark):
    df = spark.createDataFrame(
        [("c1", "producer-1", "User:alice", None, 7), ("c1", "producer-1", "User:bob", "tx-1", 8)],
        "cluster string, client_id string, principal string, transactional_id string, correlation_id int",
    )
    expected = spark.createDataFrame(
        [
            ("c1", _sha("k:producer-1"), _sha("k:User:alice"), None, 7),
            ("c1", _sha("k:producer-1"), _sha("k:User:bob"), _sha("k:tx-1"), 8),
        ],
        "cluster string, client_id string, principal string, transactional_id string, correlation_id int",
    )
    assert_df_equality(with_hashed_identities(df, "k"), expected)


def test_another_salt_gives_other_hashes_and_frames_without_identities_pass_through(spark):
    df = spark.createDataFrame([("producer-1",)], "client_id string")
    one = with_hashed_identities(df, "a").first()["client_id"]
    two = with_hashed_identities(df, "b").first()["client_id"]
    assert one == _sha("a:producer-1") and two == _sha("b:producer-1") and one != two
    other = spark.createDataFrame([(1,)], "partition int")
    assert with_hashed_identities(other, "a") is other


def test_empty_salt_is_refused(spark):
    df = spark.createDataFrame([("producer-1",)], "client_id string")
    with pytest.raises(ValueError, match="salt must not be empty"):
        with_hashed_identities(df, "")


def test_privacy_conf_reads_the_salt_from_the_environment(monkeypatch):
    config = parse_config({"privacy": {"hash_identities": True, "salt_env": "TEST_ACKREPLAY_SALT"}})
    monkeypatch.delenv("TEST_ACKREPLAY_SALT", raising=False)
    with pytest.raises(ConfigError, match="TEST_ACKREPLAY_SALT is not set"):
        config.privacy.salt()
    monkeypatch.setenv("TEST_ACKREPLAY_SALT", "pepper")
    assert config.privacy.salt() == "pepper"
    assert parse_config({}).privacy.hash_identities is False
    with pytest.raises(ConfigError, match="unknown key 'privacy.salt'"):
        parse_config({"privacy": {"salt": "in-the-yaml"}})
