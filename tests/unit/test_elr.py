"""Eligible leader replicas (KIP-966) per leader epoch for the kernel (ackreplay/replay/elr.py)."""

from __future__ import annotations

import numpy as np

from ackreplay.replay.elr import ElrSetting, elr_settings, partition_elr_rows


def test_printed_eligible_replicas_are_used_and_the_others_derived_across_leader_epochs():
    """Min ISR 3 of RF 3 (as minisr3-4.4.0), replicas [1, 3, 2]. Leader 1 from 0 with ISR [1,3,2]; at 10 the ISR
    falls to [1,3] and the registration prints elr=[2]; at 20 to [1] (a server.log line, nothing printed:
    2 stays eligible, 3 joins); at 30 back to [1,3,2] (none). Then leader 3 from 40 with ISR [3] after the
    ISR had been [1] again at 35: 1 and 2 are eligible (Kafka would have elected 3 from them)."""
    epochs = [(0, 1, 0, (1, 3, 2)), (1, 3, 40, (3,))]
    changes = {
        0: (np.array([10, 20, 30, 35]), ((1, 3), (1,), (1, 3, 2), (1,)), ((2,), None, None, None), (1, 2, 3, 4)),
        1: (np.array([40]), ((3,),), (None,), (5,)),
    }
    setting = ElrSetting(True, "test")
    rows = partition_elr_rows((1, 3, 2), 3, epochs, changes, setting)
    # leader 1's followers are [3, 2]; row 0 is the start ISR's
    assert rows[0].tolist() == [[False, False], [False, True], [True, True], [False, False], [True, True]]
    # leader 3's followers are [1, 2]: both eligible from its start on
    assert rows[1].tolist() == [[True, True], [True, True]]
    # the printed elr=[2] is what the rule derives from the ISRs before it
    assert (setting.printed, setting.derived_equal) == (1, 1)


def test_an_epoch_without_a_start_isr_starts_from_its_first_change_and_one_without_any_isr_has_none():
    epochs = [(4, 2, 100, None), (5, 1, 200, None)]
    changes = {4: (np.array([150]), ((2,),), (None,), (None,))}
    rows = partition_elr_rows((1, 2, 3), 2, epochs, changes)
    # the first ISR in the data is below min ISR with nothing known before it: none assumed
    assert rows[4].tolist() == [[False, False], [False, False]]
    assert rows[5].tolist() == [[False, False]]  # no ISR line: the kernel's assumed full ISR, one row


def test_a_printed_commit_after_one_no_line_shows_is_not_compared():
    """lab-4.4.0-us at its end: ISR [3,1,2] (partition epoch 4), then [3] with elr=[2] printed at epoch 6. The
    change at epoch 5 (broker 1 out, ISR [3,2] still at min ISR 2: no eligible replicas) was applied with
    the next and never logged; from the two it sees, the rule would make 1 eligible too."""
    epochs = [(1, 3, 0, (3, 1, 2))]
    changes = {1: (np.array([5, 10]), ((3, 1, 2), (3,)), ((), (2,)), (4, 6))}
    setting = ElrSetting(True, "test")
    rows = partition_elr_rows((2, 3, 1), 2, epochs, changes, setting)
    # epoch 4 (elr=[]) is compared and derived alike; epoch 6 follows the unlogged 5: not compared
    assert (setting.printed, setting.derived_equal, setting.after_gap) == (1, 1, 1)
    assert rows[1].tolist() == [[False, False], [False, False], [True, False]]  # followers [2, 1]; as printed


def test_whether_a_cluster_keeps_them_comes_from_the_conf_then_the_logs():
    settings = elr_settings(
        ["a", "b", "c", "d", "e"], {"a": False, "b": None}, printed={"a", "b"}, levels={"c": 1, "d": 0}
    )
    assert {c: s.enabled for c, s in settings.items()} == {"a": False, "b": True, "c": True, "d": False, "e": False}
    assert settings["c"].evidence == "brokers announce eligible.leader.replicas.version 1 in API_VERSIONS responses"
    assert settings["e"].evidence.startswith("no API_VERSIONS response")
