"""Discovering input files in the input layout of design.md.

<input>/<cluster>/broker-<id>/kafka-request.log*   (plain or gzip, rotated names)
<input>/<cluster>/broker-<id>/server.log*
<input>/<cluster>/broker-<id>/state-change.log*
<input>/<cluster>/controller-<id>/controller.log*  (a KRaft controller's; in broker-<id>/ for a combined node)
<input>/<cluster>/topics.txt
<input>/<cluster>/metrics/*.prom
<input>/<cluster>/create-times/*         (`kafka-dump-log --deep-iteration` output: record CreateTimes)
<input>/<cluster>/client/batches-*.csv*  (an instrumented producer's log of its batches: the lab's)
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pyarrow import fs as pafs

from ackreplay.storage.filesystems import UnsupportedInputLocation, open_uri, scheme_of, uri_of
from ackreplay.transforms.send_times import CLIENT_BATCHES, CREATE_TIMES

_BROKER_DIR = re.compile(r"^broker-(\d+)$")
_KINDS = (
    ("request_log", re.compile(r"^kafka-request\.log(\..+)?$")),
    ("server_log", re.compile(r"^server\.log(\..+)?$")),
    ("state_change_log", re.compile(r"^state-change\.log(\..+)?$")),
)
_CLIENT_BATCHES = re.compile(r"^batches-.+\.csv(\.gz)?$")
# A KRaft controller's own folder (the lab writes one): it leads no data partition, so its request log has no
# PRODUCE or follower FETCH of one, and the brokers' logs carry every ISR and leader change the replay reads. Its
# controller.log is read: the brokers' registrations (fenced, in controlled shutdown) decide which followers may
# join an ISR. A node with process.roles=broker,controller writes controller.log beside its server.log.
_CONTROLLER_DIR = re.compile(r"^controller-(\d+)$")
_CONTROLLER_LOG = re.compile(r"^controller\.log(\..+)?$")
_GZIP_MAGIC = b"\x1f\x8b"
# log4j's time-based rollover names a rotated file after the period it holds: `.2026-11-20-10`
# (hourly, Kafka's default for every log) or `.2026-11-20` (daily), maybe followed by `.gz`.
_ROTATED_PERIOD = re.compile(r"\.(\d{4}-\d\d-\d\d)(?:-(\d\d))?(?:\.gz)?$")


class InputError(ValueError):
    """The input folder is missing, empty or unreadable."""


@dataclass(frozen=True)
class InputFile:
    """One raw file. `source_file` is its path relative to the input root: the identity used in tables."""

    cluster: str
    broker_id: int | None
    kind: str
    source_file: str
    uri: str
    size: int
    mtime_ns: int
    compression: str  # "gzip" or "none", from the file's magic bytes, not its name


@dataclass(frozen=True)
class InputInventory:
    """The input files of a run, with what the layout ignores, misplaces or knows and does not read."""

    files: tuple[InputFile, ...]
    ignored: tuple[str, ...]  # paths under the root that are not in the layout
    # named like a file the layout reads, somewhere it is not read (e.g. a request log without its broker-<id>
    # folder): `ingest.misplaced_files` decides whether that stops the run
    misplaced: tuple[str, ...] = ()
    controller_files: tuple[str, ...] = ()  # under <cluster>/controller-<id>/, not controller.log: known, not read

    def of_kind(self, kind: str) -> list[InputFile]:
        return [f for f in self.files if f.kind == kind]

    def fingerprint(self, kinds: tuple[str, ...] | None = None) -> str:
        """A stable id of the input set (names, sizes, mtimes): the same files give the same id."""
        digest = hashlib.sha256()
        for f in sorted(self.files, key=lambda f: f.source_file):
            if kinds is None or f.kind in kinds:
                digest.update(f"{f.source_file}\0{f.size}\0{f.mtime_ns}\n".encode())
        return digest.hexdigest()[:16]


def rotation_period(f: InputFile) -> tuple[datetime, datetime] | None:
    """[start, end) of the broker-local period a rotated log holds, from its name; None if not rotated."""
    if f.kind not in ("request_log", "server_log", "state_change_log", "controller_log"):
        return None
    m = _ROTATED_PERIOD.search(f.source_file.rsplit("/", 1)[-1])
    if m is None:
        return None
    try:
        start = datetime.fromisoformat(m.group(1)) + timedelta(hours=int(m.group(2) or 0))
    except ValueError:  # e.g. month 13: not a rotation suffix after all
        return None
    if m.group(2) is not None and int(m.group(2)) > 23:
        return None
    return start, start + (timedelta(hours=1) if m.group(2) is not None else timedelta(days=1))


def _filesystem(root: str, settings: Mapping[str, str] | None) -> tuple[pafs.FileSystem, str]:
    try:
        filesystem, base = open_uri(root, settings)
    except UnsupportedInputLocation as exc:
        raise InputError(str(exc)) from None
    if isinstance(filesystem, pafs.LocalFileSystem):
        import os

        base = os.path.abspath(base)
    return filesystem, base


def _kind_of(cluster_rel: list[str]) -> tuple[str | None, int | None]:
    if cluster_rel == ["topics.txt"]:
        return "topics", None
    if len(cluster_rel) == 2 and cluster_rel[0] == "metrics" and cluster_rel[1].endswith(".prom"):
        return "metrics", None
    if len(cluster_rel) == 2 and cluster_rel[0] == "create-times":
        return CREATE_TIMES, None
    if len(cluster_rel) == 2 and cluster_rel[0] == "client" and _CLIENT_BATCHES.match(cluster_rel[1]):
        return CLIENT_BATCHES, None
    if len(cluster_rel) == 2 and (m := _BROKER_DIR.match(cluster_rel[0])):
        for kind, pattern in _KINDS:
            if pattern.match(cluster_rel[1]):
                return kind, int(m.group(1))
    node = _BROKER_DIR.match(cluster_rel[0]) or _CONTROLLER_DIR.match(cluster_rel[0])
    if len(cluster_rel) == 2 and node and _CONTROLLER_LOG.match(cluster_rel[1]):
        return "controller_log", int(node.group(1))
    return None, None


def discover_inputs(root: str, settings: Mapping[str, str] | None = None) -> InputInventory:
    """List the input files under `root` (a folder, or an object store prefix opened with the Hadoop S3A
    `settings`: `filesystems.s3a_settings`), check each can be opened, and detect its compression."""
    filesystem, base = _filesystem(root, settings)
    try:
        info = filesystem.get_file_info(base)
        if info.type != pafs.FileType.Directory:
            raise InputError(f"input folder {root} does not exist or is not a folder")
        entries = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    except OSError as exc:  # an object store's refusal (credentials, endpoint): its own words, one line
        raise InputError(f"cannot list input folder {root}: {_first_line(exc)}") from None
    files, ignored, misplaced, controller_files = [], [], [], []
    for entry in sorted(entries, key=lambda e: e.path):
        if entry.type != pafs.FileType.File:
            continue
        rel = entry.path[len(base.rstrip("/")) + 1 :]
        parts = rel.split("/")
        kind, broker_id = _kind_of(parts[1:]) if len(parts) >= 2 else (None, None)
        if kind is None:
            if len(parts) >= 3 and _CONTROLLER_DIR.match(parts[1]):
                controller_files.append(rel)
            elif _read_by_name(parts[-1]):
                misplaced.append(rel)
            else:
                ignored.append(rel)
            continue
        try:
            with filesystem.open_input_stream(entry.path, compression=None) as stream:
                magic = stream.read(2)
        except OSError as exc:
            raise InputError(f"cannot read input file {entry.path}: {_first_line(exc)}") from None
        uri = entry.path if isinstance(filesystem, pafs.LocalFileSystem) else uri_of(scheme_of(root), entry.path)
        files.append(
            InputFile(
                cluster=parts[0],
                broker_id=broker_id,
                kind=kind,
                source_file=rel,
                uri=uri,
                size=entry.size,
                mtime_ns=entry.mtime_ns or 0,
                compression="gzip" if magic == _GZIP_MAGIC else "none",
            )
        )
    if not files:
        raise InputError(
            f"no input files under {root}: expected <cluster>/broker-<id>/kafka-request.log* "
            f"and <cluster>/topics.txt (see README, 'Input layout')"
        )
    return InputInventory(tuple(files), tuple(ignored), tuple(misplaced), tuple(controller_files))


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _read_by_name(name: str) -> bool:
    """Whether a file of this name is one the layout reads (in its place)."""
    return (
        name == "topics.txt"
        or name.endswith(".prom")
        or bool(_CLIENT_BATCHES.match(name))
        or any(pattern.match(name) for _, pattern in _KINDS)
    )


def refuse_misplaced(misplaced: Sequence[str], setting: str) -> None:
    """Stop the run on files the layout would read elsewhere (`ingest.misplaced_files: error`, the default):
    a request log without its broker-<id> folder would otherwise leave the cluster without produces, quietly."""
    if not misplaced or setting != "error":
        return
    shown = "\n".join(f"  {path}" for path in misplaced[:10])
    more = f"\n  ... and {len(misplaced) - 10} more" if len(misplaced) > 10 else ""
    raise InputError(
        f"{len(misplaced)} input file(s) named like logs the replay reads are not where it reads them:\n{shown}{more}\n"
        "expected <cluster>/broker-<id>/kafka-request.log*, server.log*, state-change.log*; <cluster>/topics.txt;"
        " <cluster>/metrics/*.prom; <cluster>/client/batches-*.csv (README, 'Input layout'). Move them, or pass"
        " --allow-skipped (ingest.misplaced_files: warning) to go on without them"
    )


def skipped_lines(ignored: Sequence[str], misplaced: Sequence[str], controller_files: Sequence[str]) -> list[str]:
    """What the listing left out, said once (a run never skips a file without a word)."""
    out = []
    if misplaced:
        out.append(
            f"  {len(misplaced):,} files named like inputs but outside the layout, not read: {', '.join(misplaced[:5])}"
            + (" ..." if len(misplaced) > 5 else "")
        )
    if controller_files:
        out.append(
            f"  {len(controller_files):,} files of KRaft controllers (controller-<id>/) other than controller.log not"
            " read: controllers lead no data partitions"
        )
    if ignored:
        out.append(f"  {len(ignored):,} other files outside the input layout not read, e.g. {ignored[0]}")
    return out


def discover_all(sources: Sequence[str | InputFile], settings: Mapping[str, str] | None = None) -> InputInventory:
    """`discover_inputs` over several input folders; the same relative file in two of them is an error.

    A source may also be an `InputFile` already discovered: the scheduler (`ackreplay.ledger`) selects
    the new and changed files itself and passes them through `run_ingest` this way.
    """
    files: list[InputFile] = []
    ignored: list[str] = []
    misplaced: list[str] = []
    controller_files: list[str] = []
    seen: dict[str, str] = {}
    for source in sources:
        if isinstance(source, InputFile):
            found, where = [source], source.uri
        else:
            inventory = discover_inputs(source, settings)
            found, where = list(inventory.files), source
            ignored.extend(inventory.ignored)
            misplaced.extend(inventory.misplaced)
            controller_files.extend(inventory.controller_files)
        for f in found:
            if f.source_file in seen:
                raise InputError(
                    f"{f.source_file} is in two input folders ({seen[f.source_file]} and {where}); "
                    "cluster folder names must be unique across inputs"
                )
            seen[f.source_file] = where
        files.extend(found)
    if not files:
        raise InputError("no input files selected")
    return InputInventory(tuple(files), tuple(ignored), tuple(misplaced), tuple(controller_files))
