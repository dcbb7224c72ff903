"""quality.counts gives, in one Spark job, the counts Great Expectations gives for the same expectations:
every type the catalog uses, with and without a row condition, nulls, NaN, an empty domain, an all-null
column and a percent that is not a round number, compared field by field with GX's own result."""

from __future__ import annotations

import pytest

from ackreplay.quality.counts import Counts, countable, expectation_counts
from ackreplay.quality.runner import COUNTS_ONLY, _build, _validate, gx_frames

ROWS = [  # i, d, s, t, g, b
    (1, 1.0, "a", "x", 1, True),
    (2, float("nan"), "b", None, 1, False),
    (None, None, None, None, 2, True),
    (5, -1.0, "a", "x", 2, None),
    (2, 3.0, "c", "x", None, True),
    (None, 2.0, "a", None, None, True),
    (7, 0.0, "a", "y", 3, True),
]
SCHEMA = "i long, d double, s string, t string, g long, b boolean"


def _when(condition: str) -> dict:
    return {"row_condition": condition, "condition_parser": "spark"}


SPECS = [
    ("ExpectColumnValuesToBeBetween", {"column": "i", "min_value": 1, "max_value": 4}),
    ("ExpectColumnValuesToBeBetween", {"column": "i", "min_value": 2}),
    ("ExpectColumnValuesToBeBetween", {"column": "i", "min_value": None, "max_value": 2}),
    ("ExpectColumnValuesToBeBetween", {"column": "d", "min_value": 0}),  # NaN counts as >= 0, as in Spark
    ("ExpectColumnValuesToBeBetween", {"column": "d", "min_value": 0, "max_value": 2.5}),
    ("ExpectColumnValuesToBeBetween", {"column": "d", "min_value": -1.0}),
    ("ExpectColumnValuesToBeBetween", {"column": "i", "min_value": 2, **_when("g IN (1, 3)")}),
    ("ExpectColumnValuesToBeBetween", {"column": "i", "min_value": 1, **_when("g = 9")}),  # empty domain
    ("ExpectColumnValuesToBeBetween", {"column": "n", "min_value": 1}),  # all null
    ("ExpectColumnValuesToBeInSet", {"column": "s", "value_set": ["a", "b"]}),
    ("ExpectColumnValuesToBeInSet", {"column": "g", "value_set": [1]}),
    ("ExpectColumnValuesToBeInSet", {"column": "b", "value_set": [True]}),
    ("ExpectColumnValuesToBeInSet", {"column": "n", "value_set": [1]}),
    ("ExpectColumnValuesToNotBeNull", {"column": "t"}),
    ("ExpectColumnValuesToNotBeNull", {"column": "t", **_when("g = 1")}),
    ("ExpectColumnValuesToNotBeNull", {"column": "t", **_when("g = 9")}),
    ("ExpectColumnValuesToBeNull", {"column": "t", **_when("g IS NULL")}),
    ("ExpectColumnValuesToBeNull", {"column": "t", **_when("g = 9")}),
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["s", "t"]}),
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["s", "g"]}),
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["s", "t"], **_when("g = 1")}),
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["s", "t"], **_when("b")}),  # a duplicate outside
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["n", "t"]}),  # nulls group together
    ("ExpectCompoundColumnsToBeUnique", {"column_list": ["s", "g"], **_when("g = 9")}),
]


@pytest.fixture(scope="module")
def frame(spark):
    return spark.createDataFrame(ROWS, SCHEMA).selectExpr("*", "CAST(NULL AS long) AS n")


def test_the_counts_are_those_gx_reports(frame):
    assert all(countable(*spec) for spec in SPECS)
    ours = expectation_counts(frame, SPECS)
    expectations = [_build(c, k, {"check": "t", "key": str(i)}) for i, (c, k) in enumerate(SPECS)]
    result = _validate(gx_frames(), "counts", frame, expectations, COUNTS_ONLY)
    theirs = {}
    for r in result.results:
        body = r.result or {}
        theirs[int(r.expectation_config.meta["key"])] = (
            Counts(body.get("element_count"), body.get("unexpected_count"), body.get("unexpected_percent")),
            r.success,
        )
    assert [theirs[i][0] for i in range(len(SPECS))] == ours
    assert [theirs[i][1] for i in range(len(SPECS))] == [c.success for c in ours]


def test_the_counts_by_hand(frame):
    ours = expectation_counts(frame, SPECS)
    assert ours[0] == Counts(7, 2, 40.0)  # i in [1, 4]: 5 and 7 of the five set
    assert ours[4] == Counts(7, 3, 50.0)  # d in [0, 2.5]: NaN, -1.0, 3.0 of six
    assert ours[6] == Counts(3, 1, 1 / 3 * 100)  # g in (1, 3): i = 1 of 1, 2, 7
    assert ours[7] == Counts(0, None, None)  # an empty domain: no count (GX)
    assert ours[8] == Counts(7, 0, None)  # nothing set: nothing unexpected, no percent
    assert ours[11] == Counts(7, 1, 1 / 6 * 100)  # b = False once of six set
    assert ours[13] == Counts(7, 3, 3 / 7 * 100)
    assert ours[18] == Counts(7, 2, 2 / 6 * 100)  # (a, x) twice; (None, None) ignored
    assert ours[21] == Counts(5, 0, 0.0)  # (a, x) twice, but one of them has b unset
    assert ours[22] == Counts(7, 3, 3 / 4 * 100)  # (None, x) three times, (None, y) once; three all null
    assert ours[23] == Counts(0, 0, None)  # GX's compound uniqueness counts 0 on an empty domain


def test_an_option_it_does_not_know_goes_to_gx():
    assert not countable("ExpectColumnValuesToBeBetween", {"column": "i", "min_value": 1, "mostly": 0.9})
    assert not countable("ExpectColumnValuesToBeBetween", {"column": "i", "strict_min": True})
    assert not countable("ExpectColumnValuesToMatchRegex", {"column": "s", "regex": "a"})
