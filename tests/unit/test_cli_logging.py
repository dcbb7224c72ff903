"""The console keeps the libraries' records from WARNING up: a GX module that sets its own logger to INFO
when imported does not print its "Created temporary directory" line on every validation."""

from __future__ import annotations

import logging

from ackreplay.cli import quiet_libraries


def _record(name: str, level: int) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "message", None, None)


def test_library_records_below_warning_are_dropped_and_ours_kept():
    assert not quiet_libraries(_record("great_expectations.data_context.types.base", logging.INFO))
    assert not quiet_libraries(_record("py4j.clientserver", logging.DEBUG))
    assert quiet_libraries(_record("great_expectations.core", logging.WARNING))
    assert quiet_libraries(_record("ackreplay.quality.runner", logging.INFO))
    assert quiet_libraries(_record("great_expectations_extra", logging.ERROR))
