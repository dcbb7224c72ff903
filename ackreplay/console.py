"""What a command shows: a quiet console by default, everything in a log file.

Without `-v` the console gets the results (the summaries the stages print), warnings and errors. The
stages' progress records (INFO: a step started, a step done in N s) show as one status line that the
next one overwrites, on a terminal only. Spark's JVM writes its own output (start-up warnings, log4j's
console appender) to the log file, which also gets every Python log record at DEBUG: nothing is lost, it
is in the file the run names at its end. With `-v` everything goes to the console as well.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

_results = logging.getLogger("ackreplay.console")  # what `Console.echo` printed, for the log file
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries whose INFO records are noise wherever they go (GX's "Created temporary directory ..." at every
# validation context); their warnings and errors still show.
NOISY_LOGGERS = ("py4j", "urllib3", "great_expectations")


def log_file_for(lakehouse: str, command: str) -> Path:
    """Where a command's log goes: <lakehouse>/logs/ackreplay-<UTC time>-<command>.log for a local lakehouse
    that can be written, else the same name under the temp folder (object storage, a read-only or missing
    lakehouse: the command itself says what is wrong with it)."""
    from ackreplay.storage.arrow_delta import arrow_writable, local_path

    name = f"ackreplay-{datetime.now(UTC):%Y%m%dT%H%M%S}-{command}.log"
    if arrow_writable(lakehouse):
        folder = Path(local_path(lakehouse)) / "logs"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder / name
        except OSError:
            pass
    folder = Path(tempfile.gettempdir()) / "ackreplay-logs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def quiet_libraries(record: logging.LogRecord) -> bool:
    """Drop the noisy libraries' records below WARNING: some of their modules set their own logger to INFO
    when imported, which a parent logger's level does not undo."""
    return record.levelno >= logging.WARNING or not record.name.startswith(NOISY_LOGGERS)


class Console(logging.Handler):
    """The console side of a quiet command: records at WARNING and above as lines, ackreplay's INFO records as
    a transient status line on a terminal (dropped elsewhere: the log file has them), and `echo` for the
    results, which first clears a status line so that nothing prints over it."""

    def __init__(self, stream=None):
        super().__init__(logging.INFO)
        self.stream = stream if stream is not None else sys.stderr
        self.is_terminal = self.stream.isatty()
        self._status_shown = False
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def _clear(self) -> None:
        if self._status_shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._status_shown = False

    def flush(self) -> None:
        """Clear the status line (logging calls this at exit; the CLI before it prints an error)."""
        self._clear()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.levelno >= logging.WARNING:
                self._clear()
                self.stream.write(self.format(record) + "\n")
                self.stream.flush()
            elif self.is_terminal and record.name.startswith("ackreplay"):
                width = shutil.get_terminal_size((100, 20)).columns
                self.stream.write("\r\033[K" + record.getMessage()[: max(width - 1, 10)])
                self.stream.flush()
                self._status_shown = True
        except Exception:
            self.handleError(record)

    def echo(self, line: str = "") -> None:
        """Print a result line (the stages' summaries) on stdout; the log file gets it too."""
        self._clear()
        print(line, flush=True)
        _results.debug("%s", line)


def configure_logging(verbose: bool, log_file: Path | None) -> Console | None:
    """Root logging for a command: `log_file` gets every record at DEBUG; the console gets everything with
    `verbose` (as before the quiet console), else the `Console` handler, which is returned."""
    root = logging.getLogger()
    # the file gets ackreplay's own DEBUG records; other libraries' only with -v
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    logging.getLogger("ackreplay").setLevel(logging.DEBUG)
    for handler in list(root.handlers):  # a command run again in the same process (tests, notebooks)
        if getattr(handler, "_ackreplay", False):
            root.removeHandler(handler)
            handler.close()
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if log_file is not None:
        to_file = logging.FileHandler(log_file, encoding="utf-8")
        to_file.setFormatter(logging.Formatter(LOG_FORMAT))
        to_file.addFilter(quiet_libraries)
        _add(root, to_file)
    if verbose:
        loud = logging.StreamHandler(sys.stderr)
        loud.setFormatter(logging.Formatter(LOG_FORMAT))
        _add(root, loud)
        return None
    console = Console()
    console.addFilter(quiet_libraries)
    _add(root, console)
    return console


def _add(root: logging.Logger, handler: logging.Handler) -> None:
    handler._ackreplay = True  # type: ignore[attr-defined]
    root.addHandler(handler)


@contextmanager
def output_to(path: Path | None) -> Iterator[None]:
    """Point this process's stdout and stderr file descriptors at `path` for the block, and back after: a
    process started inside it (Spark's JVM, which writes its warnings and log4j's console output to the
    descriptors it inherits, and the Python workers it starts) keeps writing there for its whole life.
    `None`: nothing is redirected."""
    if path is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as target:
        os.dup2(target.fileno(), 1)
        os.dup2(target.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
