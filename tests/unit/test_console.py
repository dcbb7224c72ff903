"""The quiet console: results and warnings on the console, progress as a transient status line on a terminal,
everything (a started JVM's own output included) in the command's log file."""

from __future__ import annotations

import io
import logging
import os

from ackreplay.console import Console, log_file_for, output_to, quiet_libraries


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_progress_is_a_status_line_on_a_terminal_and_results_print_over_it(capsys):
    terminal = _Terminal()
    console = Console(terminal)
    console.handle(_record("ackreplay.ingest.stage", logging.INFO, "writing quarantine ..."))
    console.handle(_record("ackreplay.ingest.stage", logging.INFO, "writing quarantine done in 2.4 s"))
    console.handle(_record("pyspark.sql", logging.INFO, "not ours: not shown"))
    console.echo("ingest run i-1: 6 request-log files")
    console.handle(_record("ackreplay.replay.stage", logging.WARNING, "no follower evidence for c9"))
    assert terminal.getvalue() == (
        "\r\033[Kwriting quarantine ..."
        "\r\033[Kwriting quarantine done in 2.4 s"
        "\r\033[K"  # cleared before the result is printed
        "WARNING ackreplay.replay.stage: no follower evidence for c9\n"
    )
    assert capsys.readouterr().out == "ingest run i-1: 6 request-log files\n"


def test_progress_is_left_to_the_log_file_when_the_console_is_not_a_terminal():
    piped = io.StringIO()
    console = Console(piped)
    console.handle(_record("ackreplay.ingest.stage", logging.INFO, "writing quarantine ..."))
    console.handle(_record("ackreplay.gold.stage", logging.ERROR, "gold failed"))
    assert piped.getvalue() == "ERROR ackreplay.gold.stage: gold failed\n"


def test_the_descriptors_point_at_the_log_inside_output_to_and_back_after(tmp_path, capfd):
    # A process started inside the block inherits descriptors 1 and 2 as they are then (the JVM writes there for
    # its whole life); what is written to them inside goes to the log, after it to the console again.
    log = tmp_path / "run.log"
    with output_to(log):
        os.write(1, b"jvm out\n")
        os.write(2, b"jvm err\n")
    os.write(1, b"after the block: on the console\n")
    assert log.read_text() == "jvm out\njvm err\n"
    assert capfd.readouterr().out == "after the block: on the console\n"


def test_the_log_goes_to_the_lakehouse_when_it_can_else_to_the_temp_folder(tmp_path):
    lakehouse = tmp_path / "lh"
    log = log_file_for(str(lakehouse), "run")
    assert log.parent == lakehouse / "logs" and log.name.startswith("ackreplay-") and log.name.endswith("-run.log")
    a_file = tmp_path / "file"
    a_file.write_text("not a folder")
    assert log_file_for(str(a_file), "ingest").parent.name == "ackreplay-logs"  # a lakehouse that is a file
    assert log_file_for("s3a://bucket/lh", "gold").parent.name == "ackreplay-logs"  # object storage


def test_library_records_below_warning_are_dropped_and_ours_kept():
    # a GX module sets its own logger to INFO when imported ("Created temporary directory" at every validation)
    assert not quiet_libraries(_record("great_expectations.data_context.types.base", logging.INFO, "m"))
    assert not quiet_libraries(_record("py4j.clientserver", logging.DEBUG, "m"))
    assert quiet_libraries(_record("great_expectations.core", logging.WARNING, "m"))
    assert quiet_libraries(_record("ackreplay.quality.runner", logging.INFO, "m"))
    assert quiet_libraries(_record("great_expectations_extra", logging.ERROR, "m"))
