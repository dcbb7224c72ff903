"""The per-connection chain of the producer-visible replay (ackreplay/replay/connections.py)."""

from __future__ import annotations

import numpy as np
import pytest

from ackreplay.replay.connections import UNKNOWN_CONNECTION, chain_requests
from ackreplay.schemas.vocabulary import NEVER


def _chain(
    connection, t_start, t_sent, service, send=None, linger_us=5_000, gap_us=1_000, recorded_policy=None, send_last=None,
    previous_response=None,
):  # fmt: skip
    n = len(t_start)
    send = np.asarray(send if send is not None else [0] * n, np.int64)
    return chain_requests(
        connection=np.asarray(connection, np.int64),
        t_start=np.asarray(t_start, np.int64),
        t_response_sent=np.asarray(t_sent, np.int64),
        service=np.asarray(service, np.int64),
        send_first=send,
        send_last=send if send_last is None else np.asarray(send_last, np.int64),
        has_send=send > 0,
        linger_us=linger_us,
        blocked_gap_us=gap_us,
        recorded_policy=None if recorded_policy is None else np.asarray(recorded_policy, np.int64),
        previous_response=None if previous_response is None else np.asarray(previous_response, np.int64),
    )


def test_a_backlog_drains_one_request_at_a_time_however_slow_the_producers_turnaround():
    """Connection 7: request 0 is the first of its replay group; the response before it (50 ms, in the previous
    group) is given. Its batch was sent at 2 ms and it was read 0.3 ms after that response: it waited. Request 1
    started 1.3 ms after request 0's response (a slow producer), but its batch existed at 3 ms: part of the same
    backlog, it waited too; under a policy that answers at once both leave once lingered.
    Request 2's batch was sent after the response before it: it did not wait. Connection 8: the same 1.3 ms
    after a request that did not wait is no backlog (the producer may have been held by something else: a
    metadata refresh, a leader change). Recorded under acks=all; rows: acks=1 (no slower), acks=all."""
    chained = _chain(
        connection=[7, 7, 7, 8, 8],
        t_start=[50_300, 52_600, 70_000, 30_000, 32_300],
        t_sent=[51_300, 53_600, 71_000, 31_000, 33_300],
        service=[[1_000] * 5, [1_000] * 5],
        send=[2_000, 3_000, 60_000, 20_000, 21_000],
        previous_response=[50_000, -NEVER, -NEVER, -NEVER, -NEVER],
        recorded_policy=[1] * 5,
    )
    # under the recorded policy (acks=all, row 1) nothing moves
    assert chained.start[1].tolist() == [50_300, 52_600, 70_000, 30_000, 32_300]
    # under acks=1 both requests of connection 7 leave once their batch lingered
    assert chained.start[0].tolist() == [7_000, 8_000, 70_000, 30_000, 32_300]


def test_a_request_leaves_once_its_first_batch_lingered_the_later_ones_count_in_later_requests():
    # one request carrying a batch sent at 2 ms and one sent at 40 ms, read at 60 ms behind a slow response
    # (recorded under acks=all): under acks=1 it leaves at 7 ms (its first batch lingered); the 40 ms batch is
    # counted from its own send (groups._producer_view), not held
    chained = _chain(
        connection=[7, 7], t_start=[0, 60_000], t_sent=[59_800, 61_000],
        service=[[1_000, 1_000], [59_800, 1_000]], send=[1, 2_000], send_last=[1, 40_000], recorded_policy=[1, 1],
    )  # fmt: skip
    assert chained.start[0].tolist() == [0, 7_000]
    # under a policy no faster than the recorded one the connection is no freer: it leaves with all its batches
    slower = _chain(
        connection=[7, 7], t_start=[0, 60_000], t_sent=[59_800, 61_000],
        service=[[59_800, 1_000], [59_900, 1_000]], send=[1, 2_000], send_last=[1, 40_000], recorded_policy=[0, 0],
    )  # fmt: skip
    assert slower.start[1].tolist() == [0, 60_100]


def test_a_request_blocked_behind_a_slow_response_starts_at_its_arrival_under_a_faster_policy():
    # Recorded under acks=all: request 0 waited 50 ms for a follower; request 1 (batch sent at 2 ms) was
    # read 0.5 ms after that response; request 2 came much later. Rows: acks=1, acks=all.
    chained = _chain(
        connection=[7, 7, 7],
        t_start=[0, 50_500, 100_000],
        t_sent=[50_000, 51_500, 101_000],
        service=[[1_000, 1_000, 1_000], [50_000, 1_000, 1_000]],
        send=[1, 2_000, 99_000],
    )
    assert chained.blocked.tolist() == [False, True, False]
    # request 1 could have been read once its batch had lingered 5 ms: 2 ms + 5 ms
    assert chained.floor.tolist() == [0, 7_000, 100_000]
    assert chained.start.tolist() == [[0, 7_000, 100_000], [0, 50_500, 100_000]]
    assert chained.response.tolist() == [[1_000, 8_000, 101_000], [50_000, 51_500, 101_000]]


def test_a_slower_policy_delays_every_later_request_on_the_connection_and_no_other():
    # recorded under acks=1 (service 1 ms each, back to back); acks=all would have taken 30 ms for the first
    chained = _chain(
        connection=[1, 1, 2],
        t_start=[0, 1_200, 500],
        t_sent=[1_000, 2_200, 1_500],
        service=[[1_000, 1_000, 1_000], [30_000, 1_000, 1_000]],
        send=[1, 1_100, 400],
    )
    # request 1 (blocked, turnaround 0.2 ms) waits for request 0's 30 ms response; connection 2 does not
    assert chained.start.tolist() == [[0, 1_200, 500], [0, 30_200, 500]]


def test_requests_without_a_connection_are_not_chained():
    chained = _chain(
        connection=[UNKNOWN_CONNECTION] * 3,
        t_start=[0, 1_000, 2_000],
        t_sent=[900, 1_900, 2_900],
        service=[[5_000, 5_000, 5_000]],
    )
    assert chained.blocked.tolist() == [False, False, False]
    assert chained.start.tolist() == [[0, 1_000, 2_000]]


def test_without_send_times_a_blocked_request_keeps_its_recorded_start_as_floor():
    chained = _chain(
        connection=[3, 3],
        t_start=[0, 40_300],
        t_sent=[40_000, 41_300],
        service=[[2_000, 1_000], [40_000, 1_000]],
        send=[0, 0],
    )
    assert chained.floor.tolist() == [0, 40_300]
    assert chained.start.tolist() == [[0, 40_300], [0, 40_300]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chain_properties_on_random_connections(seed):
    rng = np.random.default_rng(seed)
    n = 400
    connection = rng.integers(1, 5, n)
    t_start = np.sort(rng.integers(0, 2_000_000, n))
    fast = rng.integers(100, 3_000, n)
    slow = fast + rng.integers(0, 200_000, n)  # acks=all never faster than acks=1 on the same request
    service = np.stack([fast, slow])
    t_sent = t_start + slow
    send = np.maximum(t_start - rng.integers(0, 20_000, n), 1)
    # a request's latest batch: created between its first batch and the request (a blocked producer's
    # requests carry batches created seconds apart)
    send_last = send + (rng.random(n) * (t_start - send)).astype(np.int64)
    chained = _chain(connection, t_start, t_sent, service, send=send, send_last=send_last)
    # a request is never sent, under any policy, before every batch in it was created (unless the policy is
    # faster than the recorded one: test_a_request_leaves_once_its_first_batch_lingered_...)
    assert np.all(chained.start >= send_last)
    # a request never starts before the previous response on its connection, under any policy, unless
    # the producer would have sent it inside that request (merged: same start and response)
    for c in np.unique(connection):
        idx = np.flatnonzero(connection == c)
        idx = idx[np.argsort(t_start[idx], kind="stable")]
        for p in range(2):
            start, response = chained.start[p, idx], chained.response[p, idx]
            merged = (start[1:] == start[:-1]) & (response[1:] == response[:-1])
            assert np.all(merged | (start[1:] >= response[:-1]))
    # under acks=1 no produce is answered later than under acks=all
    assert np.all(chained.response[0] <= chained.response[1])
    assert np.all(chained.floor <= t_start)
    assert chained.merged > 0  # the slow policy's backlog is sent in fewer requests


def test_a_moved_batch_is_acked_when_the_followers_would_have_had_it():
    from ackreplay.replay.groups import _AckProfiles

    # one partition; a follower stalls until t=4000 (the batches appended before wait for it), then is
    # healthy again (500 µs after the append); a second partition is healthy throughout
    pkey = np.array([1, 1, 1, 1, 2, 2])
    t = np.array([0, 1_000, 2_000, 5_000, 0, 3_000])
    t_ack = np.array([[4_000, 4_000, 4_000, 5_500, 200, 3_200]])
    profiles = _AckProfiles(pkey, t, t_ack, np.ones(t_ack.shape, bool))
    rows = np.array([1, 1, 3, 4, 5])
    moved_to = np.array([1_500, 4_500, 6_000, 1_000, 2_000])
    # 1_500: still the stall's end; 4_500: no later than the next batch's ack (its wait since its own
    # append is not known to be healthy); 6_000: after the last batch, its 500 µs; partition 2: 200 µs
    assert profiles.ack_at(0, rows, moved_to).tolist() == [4_000, 5_500, 6_500, 1_200, 2_200]
    # a batch the policy did not ack says nothing (its t_ack is its rejection): the acked ones around it do
    acked = np.array([[True, True, False, True, True, True]])
    rejected_at_once = np.array([[4_000, 4_000, 2_000, 5_500, 200, 3_200]])
    profiles = _AckProfiles(pkey, t, rejected_at_once, acked)
    assert profiles.ack_at(0, np.array([2, 2, 0]), np.array([2_000, 1_500, -500])).tolist() == [5_000, 4_500, 3_500]
    # no batch of partition 1 acked: the median wait of the group's acked ones (partition 2's: 200 µs)
    other_partition_only = _AckProfiles(pkey, t, t_ack, np.array([[False] * 4 + [True] * 2]))
    assert other_partition_only.ack_at(0, np.array([0]), np.array([100])).tolist() == [300]
    nothing_acked = _AckProfiles(pkey, t, t_ack, np.zeros(t_ack.shape, bool))
    assert nothing_acked.ack_at(0, np.array([0]), np.array([100])).tolist() == [NEVER]


def test_a_batch_moved_past_the_partitions_last_batch_of_a_stall_waits_the_stall_once():
    from ackreplay.replay.groups import _AckProfiles

    # Trace 3.8.1: a replay bucket ends while a follower stalls; its partition's last batches (appended at 0 and
    # 1,000) are acked at 4,000, when the stalled follower is shrunk out, and the other partition's batches wait
    # 200 µs (the group's median wait). A request held behind them is appended after the bucket's last batch:
    # at 2,000, still in the stall, it is acked with them (4,000); at 4,500, after the stall, 200 µs later.
    # Adding the last batch's 3,000 µs wait again (5,000 and 7,500) gave the next held request another stall,
    # and the next: 35 s per record where the producer measured 7.8 s.
    profiles = _AckProfiles(
        np.array([1, 1, 2, 2, 2]),
        np.array([0, 1_000, 0, 1_000, 2_000]),
        np.array([[4_000, 4_000, 200, 1_200, 2_200]]),
        np.ones((1, 5), bool),
    )
    assert profiles.ack_at(0, np.array([1, 1]), np.array([2_000, 4_500])).tolist() == [4_000, 4_700]


def test_under_the_recorded_policy_a_connection_keeps_its_recorded_starts():
    # recorded with acks=all (policy row 1): request 1's recorded turnaround of -0.3 ms (ms log stamps)
    # would start it 0.3 ms late if it were re-chained, and request 2 could be merged into request 1
    chained = _chain(
        connection=[9, 9, 9],
        t_start=[0, 9_700, 10_500],
        t_sent=[10_000, 10_400, 11_000],
        service=[[1_000, 700, 500], [10_000, 700, 500]],
        send=[1, 200, 300],
        recorded_policy=[1, 1, 1],
    )
    assert chained.start[1].tolist() == [0, 9_700, 10_500]
    assert chained.response[1].tolist() == [10_000, 10_400, 11_000]
    # under acks=1 the backlog is not there: request 1 starts after request 0's 1 ms response (its batch
    # was ready at 5.2 ms), and request 2, whose batch existed before request 1 was sent, goes with it
    assert chained.start[0].tolist() == [0, 5_200, 5_200]
    assert chained.response[0].tolist() == [1_000, 5_900, 5_900]
    assert chained.merged == 1
