"""The producer's retries of a batch a policy rejects (ackreplay/replay/retries.py), on hand-made rows: the
back-off of each client release, the attempt the ISR admits, the batches held behind a retried one, and a
batch left undelivered by its delivery timeout or its leader's epoch."""

from __future__ import annotations

import numpy as np
import pytest

from ackreplay.replay.retries import RetrySettings, replay_retries
from ackreplay.schemas.vocabulary import NEVER

MS = 1_000


def test_the_backoff_is_fixed_before_3_7_and_kip_580s_expectation_after():
    settings = RetrySettings(backoff_us=100 * MS, backoff_max_us=1_000 * MS)
    assert settings.backoffs(True, 3).tolist() == [100 * MS] * 3
    # 100, 200, 400, 800 ms, then 1,000: a uniform ±20% jitter, capped at the maximum: E = 1000 - (1200-1000)²/(2·400)
    exponential = settings.backoffs(False, 6)
    assert exponential[:4].tolist() == pytest.approx([100 * MS, 200 * MS, 400 * MS, 800 * MS])
    assert exponential[4] == pytest.approx(950 * MS) and exponential[5] == pytest.approx(950 * MS)
    # retry.backoff.max.ms below retry.backoff.ms: the maximum, fixed (ExponentialBackoff's constructor)
    assert RetrySettings(backoff_us=500, backoff_max_us=200).backoffs(False, 2).tolist() == [200, 200]


def _retry(
    rejected, t_start, admitted_from, *, fixed=True, created=None, end=NEVER, connection=None, timeout_ms=120_000
):
    """Rows of one partition, each taking 1 ms from its start to its append and answered 0.5 ms later; the ISR
    admits appends from `admitted_from` on."""
    t_start = np.array(t_start, np.int64)
    n = t_start.size
    return replay_retries(
        t_start=t_start,
        t_local_done=t_start + MS,
        t_answered=t_start + MS,
        response_us=np.full(n, MS // 2, np.int64),
        created=t_start if created is None else np.array(created, np.int64),
        connection=np.zeros(n, np.int64) if connection is None else np.array(connection, np.int64),
        rejected=np.array(rejected),
        fixed_backoff=np.full(n, fixed),
        admits=lambda t: t >= admitted_from,
        leadership_end=end,
        settings=RetrySettings(delivery_timeout_us=timeout_ms * MS),
    )


def test_a_rejected_batch_goes_out_again_each_backoff_after_its_rejection_until_the_isr_admits_it():
    # rejected at 1 ms (answered then, read 0.5 ms later): retries start at 101.5, 203, 304.5, ... ms
    retried = _retry([True], [0], admitted_from=250 * MS)
    assert retried.out_at.tolist() == [304_500] and retried.appended_at.tolist() == [305_500]
    assert retried.undelivered.tolist() == [False]
    # exponential (a 3.7+ client): 101.5, then +1 + 0.5 + 200 -> 303 ms
    retried = _retry([True], [0], admitted_from=250 * MS, fixed=False)
    assert retried.out_at.tolist() == [303_000]


def test_nothing_rejected_is_nothing_to_retry():
    assert _retry([False, False], [0, 10 * MS], admitted_from=0) is None


def test_a_batch_sent_while_another_is_retried_waits_behind_it_and_leaves_with_its_admitted_attempt():
    # row 0 rejected at 0 ms; row 1 (acked as recorded at 50 ms) and row 2 (rejected at 120 ms) were created
    # while row 0 was being retried: both go out with row 0's admitted attempt (304.5 ms). Row 3 (400 ms) is
    # after it: as recorded. Row 4, another connection's, is not held.
    retried = _retry(
        [True, False, True, False, False], [0, 50 * MS, 120 * MS, 400 * MS, 60 * MS], admitted_from=250 * MS,
        connection=[7, 7, 7, 7, 8],
    )  # fmt: skip
    assert retried.out_at.tolist() == [304_500, 304_500, 304_500, NEVER, NEVER]
    assert retried.appended_at.tolist() == [305_500, 305_500, 305_500, NEVER, NEVER]


def test_the_held_batch_waits_as_long_as_the_retried_one():
    # the ISR admits only from 350 ms: row 0's fourth retry (1.5 + 100 + 3 x 101.5 = 406 ms), row 1 with it
    retried = _retry([True, False], [0, 50 * MS], admitted_from=350 * MS)
    assert retried.out_at.tolist() == [406_000, 406_000]


def test_a_batch_not_admitted_within_its_delivery_timeout_or_its_leaders_epoch_is_undelivered():
    # delivery.timeout.ms 1 s from creation: never admitted before 2 s
    retried = _retry([True], [0], admitted_from=2_000 * MS, timeout_ms=1_000)
    assert retried.undelivered.tolist() == [True] and retried.out_at.tolist() == [NEVER]
    # created 900 ms before its first send: 100 ms of delivery timeout left, the first retry comes later
    retried = _retry([True], [0], admitted_from=0, created=[-900 * MS], timeout_ms=1_000)
    assert retried.undelivered.tolist() == [True]
    # the leadership ends at 250 ms, before the ISR is back at 300 ms: its retries go to the next leader
    retried = _retry([True, False], [0, 100 * MS], admitted_from=300 * MS, end=250 * MS)
    assert retried.undelivered.tolist() == [True, True]
