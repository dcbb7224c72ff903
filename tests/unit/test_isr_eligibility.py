"""Which followers may join an ISR: the controllers' broker registrations (`broker_registrations`) -> spans in which
a broker was fenced, in controlled shutdown or unregistered (`stage.ineligible_spans`), and what the kernel does with
them (`Partition.isReplicaIsrEligible`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import numpy as np

from ackreplay.schemas.broker_logs import BROKER_REGISTRATIONS
from ackreplay.schemas.vocabulary import NEVER

T0 = dt.datetime(2026, 11, 23, 20, 0)
CHANGE, REGISTER = "BrokerRegistrationChangeRecord", "RegisterBrokerRecord"


def _us(ms: int) -> int:
    return int((T0 + dt.timedelta(milliseconds=ms)).replace(tzinfo=dt.UTC).timestamp() * 1_000_000)


def _rows(spark, rows):
    """(cluster, broker, epoch, record, fenced, in controlled shutdown, at ms after T0) as registration rows."""
    return spark.createDataFrame(
        [
            (
                c,
                b,
                e,
                rec,
                f,
                cs,
                100,
                T0 + dt.timedelta(milliseconds=ms),
                f"{c}/controller-100/controller.log",
                i,
                T0.date(),
                "run",
            )
            for i, (c, b, e, rec, f, cs, ms) in enumerate(rows, start=1)
        ],  # fmt: skip
        BROKER_REGISTRATIONS,
    )


def test_a_broker_is_ineligible_from_its_controlled_shutdown_or_fencing_until_it_is_unfenced(spark):
    """The 4.1.1 sample's controller log (ms after 20:00 UTC): the three brokers registered fenced and were unfenced
    at start; broker 2 entered controlled shutdown at 13:48.493, was fenced at 13:50.750, registered again (a new
    epoch, fenced) at 14:07.652 and was unfenced at 14:09.915; at the end all three shut down and stay ineligible.
    Another cluster's broker 2 is apart; a broker fenced and unfenced in one epoch (a missed heartbeat) is out for that
    span; an unregistered broker is out from then on."""
    from ackreplay.replay.stage import ineligible_spans

    c = "lab-4.1.1"
    rows = [
        (c, 3, 24, REGISTER, True, False, 597_834),
        (c, 3, 24, CHANGE, False, None, 598_832),
        (c, 2, 32, REGISTER, True, False, 600_064),
        (c, 2, 32, CHANGE, False, None, 600_492),
        (c, 2, 32, CHANGE, None, True, 828_493),
        (c, 2, 32, CHANGE, True, None, 830_750),
        (c, 2, 818, REGISTER, True, False, 847_652),
        (c, 2, 818, CHANGE, False, None, 849_915),
        (c, 2, 818, CHANGE, None, True, 916_314),
        (c, 3, 24, CHANGE, None, True, 916_342),
        (c, 3, 24, CHANGE, True, None, 916_428),
        (c, 2, 818, CHANGE, True, None, 916_431),
        ("other", 2, 5, "FenceBrokerRecord", True, None, 700_000),
        ("other", 2, 5, "UnfenceBrokerRecord", False, None, 702_000),
        ("other", 4, 6, "UnregisterBrokerRecord", None, None, 710_000),
    ]
    spans = ineligible_spans(_rows(spark, rows), [c, "other"])
    assert {k: v.tolist() for k, v in spans.items()} == {
        (c, 2): [[_us(600_064), _us(600_492)], [_us(828_493), _us(849_915)], [_us(916_314), NEVER]],
        (c, 3): [[_us(597_834), _us(598_832)], [_us(916_342), NEVER]],
        ("other", 2): [[_us(700_000), _us(702_000)]],
        ("other", 4): [[_us(710_000), NEVER]],
    }
    assert list(ineligible_spans(_rows(spark, rows), ["third"])) == []
    assert all(v.dtype == np.int64 for v in spans.values())


# The 4.1.1 sample, partition 0 led by broker 3 around broker 2's restart (µs after 20:14:09 UTC): its produces
# (offset, appended) and each follower's FETCHes (dequeued, fetchOffset).
RESTART_PRODUCES = [(10833, 695_240), (10834, 783_606), (10835, 806_690), (10836, 809_935), (10837, 829_809),
                    (10838, 862_636), (10839, 885_888), (10840, 952_049), (10841, 1_079_642)]  # fmt: skip
RESTART_BROKER_1 = [(696_880, 10834), (784_277, 10835), (807_954, 10836), (829_306, 10837), (831_672, 10838),
                    (863_536, 10839), (886_377, 10840), (1_023_325, 10841), (1_083_717, 10842),
                    (1_190_320, 10843)]  # fmt: skip
RESTART_BROKER_2 = [(700_602, 10816), (710_668, 10834), (850_602, 10835), (895_653, 10838), (1_078_507, 10840),
                    (1_102_275, 10842), (1_203_695, 10843)]  # fmt: skip


def test_a_restarted_follower_counts_for_the_hw_from_its_unfencing_not_from_a_window_before_its_re_addition():
    """The 4.1.1 sample, partition 0 led by broker 3 (µs after 20:14:09 UTC; FETCHes at their dequeue): broker 2,
    back from its controlled shutdown, fetched caught up (its FETCH of 895,653 reached the leader's end at its
    previous FETCH, `ReplicaState.isCaughtUp`) while still fenced; the controller unfenced it at 915,000
    (`Partition.isReplicaIsrEligible`), and from then it held the HW back (`shouldWaitForReplicaToJoinIsr`) although
    its re-addition committed only at 1,186,000. Batch 10840 (appended at 952,049) was acked at 1,104,207, right
    after broker 2 fetched past it (1,102,275), not when broker 1 did (1,023,325)."""
    from ackreplay.replay.kernel import ReplayOptions, replay_epoch
    from ackreplay.schemas.vocabulary import Outcome
    from tests.unit.test_replay_kernel import check, epoch

    produces, broker_1, broker_2 = RESTART_PRODUCES, RESTART_BROKER_1, RESTART_BROKER_2
    inputs = epoch(
        produces, [broker_1, broker_2], follower_ids=[1, 2], isr_times=[1_186_000], isr_rows=[[1, 0], [1, 1]],
        epoch_start=0,
    )  # fmt: skip
    acked = [Outcome.ACKED] * len(produces)
    before = [696_880, 784_277, 807_954, 829_306, 831_672, 863_536, 886_377]
    # not known: broker 2 counts only from its first caught-up FETCH in the 200 ms before its re-addition
    check(replay_epoch(inputs), "acks=all", acked, [*before, 1_023_325, 1_102_275])
    fenced = replace(inputs, follower_ineligible=(None, np.array([[-1_348_000, 915_000]])))
    check(replay_epoch(fenced), "acks=all", acked, [*before, 1_102_275, 1_102_275])
    # had it been unfenced only at its re-addition's commit, it would have held neither batch back
    late = replace(inputs, follower_ineligible=(None, np.array([[-1_348_000, 1_186_000]])))
    check(replay_epoch(late), "acks=all", acked, [*before, 1_023_325, 1_083_717])
    # a caught-up FETCH counts at its broker's unfencing only within the lag of it (`lastCaughtUpTimeMs`)
    short = ReplayOptions(recorded_lag_us=10_000)
    assert replay_epoch(fenced, short)["acks=all"].t_ack.tolist()[7] == 1_023_325
    # the leader knows of the unfencing when the record reaches its metadata cache: 30 ms later it still held 10840
    # back; 200 ms later, neither batch (as if unfenced at the re-addition)
    check(replay_epoch(replace(fenced, ineligible_delay_us=30_000)), "acks=all", acked, [*before, 1_102_275, 1_102_275])
    check(
        replay_epoch(replace(fenced, ineligible_delay_us=200_000)), "acks=all", acked, [*before, 1_023_325, 1_083_717]
    )


def test_the_resimulated_isr_counts_a_caught_up_eligible_follower_in_the_hw_before_re_adding_it():
    """The first test's partition, broker 2 taken out of the ISR by the controller at 0.6 s (its controlled shutdown)
    and ineligible until its unfencing at 915,000. Re-simulated at the cluster's own lag on a leader that logged no
    "Shrinking ISR" (no proposal, so no commit delay to take from its logs: the 4.0.2 trace, lag 30 s), the ISR
    re-adds broker 2 at its FETCH that reached the HW (1,102,275); before that, from its unfencing, it is caught up
    by the Replica rule and holds the HW back all the same (`shouldWaitForReplicaToJoinIsr`), as under the recorded
    ISR: batch 10840 acked at 1,102,275 under both, not at broker 1's FETCH (1,023,325)."""
    from ackreplay.replay.kernel import EpochInputs, replay_epoch, simulate_isr
    from tests.unit.test_replay_kernel import epoch

    produces, broker_1, broker_2 = RESTART_PRODUCES, RESTART_BROKER_1, RESTART_BROKER_2
    inputs = epoch(
        produces, [broker_1, broker_2], follower_ids=[1, 2], isr_times=[600_000, 1_186_000],
        isr_rows=[[1, 1], [1, 0], [1, 1]], epoch_start=0, lags=(30_000,),
    )  # fmt: skip
    by_controller = EpochInputs(**{**inputs.__dict__, "isr_change_by_controller": np.array([True, False])})
    fenced = replace(by_controller, follower_ineligible=(None, np.array([[590_000, 915_000]])))
    isr = simulate_isr(fenced, 30_000)
    assert isr.change_times.tolist() == [600_000, 1_102_275]
    out = replay_epoch(fenced)
    acked_at = [696_880, 784_277, 807_954, 829_306, 831_672, 863_536, 886_377, 1_102_275, 1_102_275]
    assert out["acks=all"].t_ack.tolist() == out["acks=all@lag=30000"].t_ack.tolist() == acked_at


def test_the_isr_resimulation_re_adds_a_broker_the_controller_removed_once_it_is_unfenced():
    """As `test_simulate_isr_applies_the_controllers_removals`: follower 3's broker starts a controlled shutdown (the
    controller removes it at 1.0 s), stops at 1.5 s and fetches again from 3.0 s; its recorded re-addition commits at
    3.2 s. The controller's records say it was ineligible from 0.99 s until its unfencing at 3.05 s: the re-simulation
    re-adds it at its first caught-up FETCH after that (3.101 s), whatever the window before the recorded
    re-addition."""
    from ackreplay.replay.kernel import ReplayOptions, simulate_isr
    from tests.unit.test_replay_kernel import controlled_shutdown_epoch

    _, by_controller = controlled_shutdown_epoch()
    known = replace(by_controller, follower_ineligible=(np.empty((0, 2)), np.array([[990_000, 3_050_000]])))
    for options in (ReplayOptions(), ReplayOptions(isr_expand_window_us=2_500_000)):
        isr = simulate_isr(known, 30_000, options)
        assert isr.change_times.tolist() == [1_000_000, 3_101_000]
        assert isr.membership.tolist() == [[True, True], [True, False], [True, True]]
    # the leader learns of the unfencing 60 ms after the controller's line: the removal (its own line at 1.0 s, after
    # the record of 0.99 s) still belongs to that span, and the broker is re-added at its first caught-up FETCH after
    # 3.11 s
    late = simulate_isr(replace(known, ineligible_delay_us=60_000), 30_000)
    assert late.change_times.tolist() == [1_000_000, 3_201_000]
    # without the records: the window before the recorded re-addition (3.2 s - 200 ms), as before
    assert simulate_isr(by_controller, 30_000).change_times.tolist() == [1_000_000, 3_001_000]


def test_the_leaders_learn_of_a_registration_record_after_the_clusters_metadata_delay(spark):
    """The 4.0.2 corpus trace (ms after 06:47 UTC): broker 2's controlled shutdown (08.445403) and broker 3's crash
    fencing (35.932672) each came with partition changes in their batch, which every running broker applied with its
    first "Transitioning" line after it: 31.0, 42.6 and 41.3 ms, then 33.4 and 29.6 ms (broker 3 was down). The fence
    that ends a controlled shutdown, registrations and unfencings change no partition; the shutdown of all three at
    the end (records 8 ms apart) cannot be told apart. Median: 33.412 ms, which the kernel adds to the spans (they stay
    on the controller's clock); broker 2's unfencing at 21.923867 reached the leaders after the three produces of
    21.924-21.944 that they acked at once."""
    from ackreplay.replay.stage import ineligible_spans, metadata_apply_delays
    from ackreplay.schemas.broker_logs import METADATA_DELTAS

    def at(ms: float) -> dt.datetime:
        return dt.datetime(2026, 11, 26, 6, 47) + dt.timedelta(microseconds=round(ms * 1000))

    c = "lab-4.0.2"
    regs = [
        (c, 1, 13, REGISTER, True, False, 38_520.743), (c, 1, 13, CHANGE, False, None, 38_886.623),
        (c, 3, 17, REGISTER, True, False, 39_286.972), (c, 2, 18, REGISTER, True, False, 39_325.1),
        (c, 3, 17, CHANGE, False, None, 39_552.519), (c, 2, 18, CHANGE, False, None, 39_571.512),
        (c, 2, 18, CHANGE, None, True, 248_445.403), (c, 2, 18, CHANGE, True, None, 250_656.087),
        (c, 2, 582, REGISTER, True, False, 261_190.475), (c, 2, 582, CHANGE, False, None, 261_923.867),
        (c, 3, 17, CHANGE, True, None, 275_932.672), (c, 3, 735, REGISTER, True, False, 283_310.588),
        (c, 3, 735, CHANGE, False, None, 284_357.658), (c, 1, 13, CHANGE, None, True, 320_544.406),
        (c, 2, 582, CHANGE, None, True, 320_551.956), (c, 3, 735, CHANGE, None, True, 320_560.321),
    ]  # fmt: skip
    registrations = spark.createDataFrame(
        [(c_, b, e, rec, f, cs, 100, at(ms), f"{c}/controller-100/controller.log", i, T0.date(), "run")
         for i, (c_, b, e, rec, f, cs, ms) in enumerate(regs, start=1)],
        BROKER_REGISTRATIONS,
    )  # fmt: skip
    delta_times = {
        1: [248_476.369, 248_575.877, 262_028.356, 275_966.084, 276_024.262, 320_608.808],
        2: [248_487.956, 261_501.448, 262_027.529, 275_962.281, 276_245.179, 320_575.643],
        3: [248_486.731, 248_592.066, 262_021.644, 284_171.685, 320_594.289],
    }
    deltas = spark.createDataFrame(
        [(c, b, "leaders", 1, at(ms), f"{c}/broker-{b}/state-change.log", i, T0.date(), "run")
         for b, times in delta_times.items() for i, ms in enumerate(times, start=1)],
        METADATA_DELTAS,
    )  # fmt: skip
    delays = metadata_apply_delays(registrations, deltas, [c])
    assert delays == {c: (33.412, 5)}
    spans = ineligible_spans(registrations, [c])  # on the controller's clock; the kernel adds the delay
    unfenced = int((at(261_923.867) - dt.datetime(1970, 1, 1)) / dt.timedelta(microseconds=1))
    assert spans[(c, 2)][1].tolist()[1] == unfenced
    assert spans[(c, 2)][-1].tolist()[1] == NEVER  # the shutdown at the end stays open
    assert metadata_apply_delays(registrations, deltas.limit(0), [c]) == {}
