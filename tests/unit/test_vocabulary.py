"""The replay's vocabulary (schemas/vocabulary.py): policy ids as the tables spell them, parsed back, in the
kernel's and gold's orders; the outcome names."""

from __future__ import annotations

import pytest
from chispa import assert_column_equality
from pyspark.sql import functions as F

from ackreplay.schemas.vocabulary import (
    NEVER,
    OUTCOMES,
    Outcome,
    Policy,
    PolicyKind,
    lag_policy_id,
    policy_order,
    replayed_policies,
)
from ackreplay.transforms.gold import policy_rank


def test_policy_ids_are_the_tables_values_and_parse_back():
    ids = policy_order((2, 3), (5000.0, 2.5, 5000))
    assert ids == ["acks=1", "acks=all", "min.insync", "quorum=2", "quorum=3", "acks=all@lag=5000", "acks=all@lag=2.5"]
    assert [Policy.parse(i).id for i in ids] == ids
    assert Policy.parse("quorum=2") == Policy(PolicyKind.QUORUM, quorum=2)
    assert Policy.parse("acks=all@lag=30000").lag_ms == 30000.0
    assert lag_policy_id(30000) == "acks=all@lag=30000" and lag_policy_id(0.5) == "acks=all@lag=0.5"
    assert [p.kind for p in replayed_policies((2,), ())] == [
        PolicyKind.ACKS_1,
        PolicyKind.ACKS_ALL,
        PolicyKind.MIN_INSYNC,
        PolicyKind.QUORUM,
    ]


@pytest.mark.parametrize("bad", ["acks=0", "quorum=", "quorum=two", "acks=all@lag=", "acks=all@lag=inf", "ACKS=ALL"])
def test_an_unknown_policy_is_an_error_naming_the_known_ones(bad):
    with pytest.raises(ValueError, match="acks=1, acks=all, min.insync, quorum=<Q> or acks=all@lag=<ms>"):
        Policy.parse(bad)


def test_a_policy_carries_exactly_its_own_parameter():
    with pytest.raises(ValueError, match="quorum size"):
        Policy(PolicyKind.QUORUM)
    with pytest.raises(ValueError, match="quorum size"):
        Policy(PolicyKind.ACKS_ALL, quorum=2)
    with pytest.raises(ValueError, match="lag"):
        Policy(PolicyKind.ACKS_ALL_AT_LAG)
    with pytest.raises(ValueError, match=">= 0.002"):
        Policy(PolicyKind.ACKS_ALL_AT_LAG, lag_ms=0.001)


def test_outcome_names_as_produce_replay_stores_them():
    assert OUTCOMES == ["acked", "not_enough_replicas", "timeout", "not_leader", "not_enough_replicas_after_append",
                        "unreplayable"]  # fmt: skip
    assert [int(o) for o in Outcome] == list(range(6)) and Outcome.TIMEOUT.label == "timeout"
    assert NEVER == 2**63 - 1


def test_gold_reads_the_policies_in_the_vocabularys_order(spark):
    ids = ["acks=1", "quorum=2", "acks=all@lag=5000", "min.insync", "acks=all", "custom"]
    df = spark.createDataFrame(
        [(i, r) for i, r in zip(ids, [4, 3, 1, 2, 0, 5], strict=True)], "policy string, expected int"
    )
    assert_column_equality(df.withColumn("rank", policy_rank(F.col("policy"))), "rank", "expected")
