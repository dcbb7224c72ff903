"""kafka-dump-log output, classified in the task that reads the file (Arrow, no Spark shuffle).

The rules are those of `transforms/send_times.py` (its docstring explains the format): a line's meaning
depends on the lines around it (the `Dumping <segment>` line above gives the partition, the record line
below a batch line gives the batch's first CreateTime, the record lines below it each record's), so the
lines of a file are classified in file order. The file streams through in batches: the lines from the
last batch line on are held back until the next batch shows where that batch ends.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_type

from ackreplay.schemas.tables import RECORD_SENDS as RECORD_SENDS_TYPE
from ackreplay.transforms.send_times import MAX_SEND_MS as MAX_MS
from ackreplay.transforms.send_times import MIN_SEND_MS as MIN_MS

_DUMPING = r"^Dumping (?P<path>.+)$"
_SEGMENT_PARTITION = r"(?P<topic>[^/\\]+)-(?P<partition>\d{1,9})[/\\][^/\\]+$"
_BATCH = (
    r"^baseOffset: (?P<base>\d{1,19}) lastOffset: (?P<last>\d{1,19}) .*? "
    r"(?P<type>CreateTime|LogAppendTime|NoTimestampType): (?P<ms>-?\d{1,19})"
)
# The epoch of the leader that appended the batch (v2 batches; -1 or absent: unknown). After a leader
# change truncates a log, the next epoch reuses the offsets, so (partition, base offset) names one
# batch per epoch: this tells the replay which one the dump holds.
_BATCH_EPOCH = r"^baseOffset: .*? partitionLeaderEpoch: (?P<epoch>-?\d{1,9}) "
_RECORD = r"^\| offset: (?P<offset>\d{1,19}) (?P<type>CreateTime|LogAppendTime|NoTimestampType): (?P<ms>-?\d{1,19})"
# A record's key length (`DumpLogSegments` prints `keySize: -1` for a record without a key)
_RECORD_KEY = r"^\| offset: .*? keySize: (?P<size>-?\d{1,10})"

NO_PARTITION = "a batch before any 'Dumping <segment>' line: partition unknown"
NO_FIRST_RECORD = "a batch of several records without its first record's line: run kafka-dump-log with --deep-iteration"
OUTSIDE_RANGE = "CreateTime outside 2000..2100 (not epoch milliseconds)"

RECORD_SENDS = to_arrow_type(RECORD_SENDS_TYPE)
# What a file's classified lines carry besides the line's origin (file, line number)
CLASSIFIED_FIELDS = [
    ("line", pa.string()),  # the text of quarantined lines only (what the quarantine keeps)
    ("status", pa.string()),
    ("detail", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("base_offset", pa.int64()),
    ("records", pa.int32()),
    ("leader_epoch", pa.int32()),
    ("t_send", pa.timestamp("us", tz="UTC")),
    ("record_sends", RECORD_SENDS),
    ("keyed_records", pa.int32()),
]
# A file's classified lines with their line numbers, as Spark reads them (mapInArrow, applyInArrow)
CLASSIFIED_SCHEMA = pa.schema([("line_number", pa.int64()), *CLASSIFIED_FIELDS])
# What the reading task hands to Spark (`fold_unused_lines`): each row stands for `lines` lines
FOLDED_SCHEMA = CLASSIFIED_SCHEMA.append(pa.field("lines", pa.int64()))


def _to_int(strings: pa.Array, bits: int) -> pa.Array:
    """Digits -> integers, null where absent or beyond a signed `bits`-bit integer (as Spark's try_cast)."""
    target = pa.int32() if bits == 32 else pa.int64()
    try:
        values = pc.cast(strings, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        limit = 2 ** (bits - 1)
        values = pa.array(
            [int(s) if s is not None and -limit <= int(s) < limit else None for s in strings.to_pylist()], target
        )
    return values


class DumpLogClassifier:
    """Classifies one file's lines, fed in file order (`feed`), then `finish`."""

    def __init__(self) -> None:
        self._held: pa.Table | None = None  # the lines from the last batch line on, not yet classified
        self._section: str | None = None  # the segment of the last `Dumping` line before the held lines

    def feed(self, line_numbers: pa.Array, lines: pa.Array, read_errors: pa.Array) -> pa.Table | None:
        table = pa.table({"line_number": line_numbers, "line": lines, "read_error": read_errors})
        if self._held is not None:
            table = pa.concat_tables([self._held, table]).combine_chunks()
        is_batch = pc.starts_with(table["line"], "baseOffset: ").to_numpy(zero_copy_only=False)
        batch_rows = np.flatnonzero(is_batch)
        hold_from = int(batch_rows[-1]) if len(batch_rows) else table.num_rows
        if hold_from == 0:
            self._held = table
            return None
        out, self._section = self._classify(table.slice(0, hold_from))
        self._held = table.slice(hold_from)
        return out

    def finish(self) -> pa.Table | None:
        if self._held is None or self._held.num_rows == 0:
            return None
        out, self._section = self._classify(self._held)
        self._held = None
        return out

    def _classify(self, table: pa.Table) -> tuple[pa.Table, str | None]:
        """Classify `table`'s lines (the line after them, if any, is a batch line); and the segment in
        effect at their end."""
        n = table.num_rows
        line = table["line"].combine_chunks()
        read_error = table["read_error"].combine_chunks()
        numbers = table["line_number"].combine_chunks()

        # the segment in effect at each line: the last `Dumping` line at or above it
        dumping = pc.struct_field(pc.extract_regex(line, _DUMPING), "path")
        section = pc.fill_null_forward(pa.concat_arrays([pa.array([self._section], pa.string()), dumping]))[1:]
        segment = pc.extract_regex(section, _SEGMENT_PARTITION)
        topic = pc.struct_field(segment, "topic")
        partition = _to_int(pc.struct_field(segment, "partition"), 32)

        batch = pc.extract_regex(line, _BATCH)
        base = _to_int(pc.struct_field(batch, "base"), 64)
        last = _to_int(pc.struct_field(batch, "last"), 64)
        batch_type = pc.struct_field(batch, "type")
        batch_ms = _to_int(pc.struct_field(batch, "ms"), 64)
        epoch = _to_int(pc.struct_field(pc.extract_regex(line, _BATCH_EPOCH), "epoch"), 32)
        records = pc.add(pc.subtract(last, base), 1)
        fits = pc.and_(pc.greater_equal(records, -(2**31)), pc.less(records, 2**31))
        records32 = pc.if_else(fits, pc.cast(records, pa.int32(), safe=False), pa.scalar(None, pa.int32()))

        record = pc.extract_regex(line, _RECORD)
        record_offset = _to_int(pc.struct_field(record, "offset"), 64)
        record_type = pc.struct_field(record, "type")
        record_ms = _to_int(pc.struct_field(record, "ms"), 64)
        key_size = _to_int(pc.struct_field(pc.extract_regex(line, _RECORD_KEY), "size"), 32)
        is_record = pc.is_valid(record_offset)
        is_batch = pc.is_valid(base)

        # the next line's record fields (the batch's first record, with --deep-iteration); the line after
        # the last one here is the held batch line, never a record line
        def lead(values: pa.Array) -> pa.Array:
            return pa.concat_arrays([values.slice(1), pa.array([None], values.type)]) if n else values

        next_offset, next_type, next_ms = lead(record_offset), lead(record_type), lead(record_ms)

        # a record line belongs to the batch line above it when its offset is in that batch's range
        batch_line_numbers = pc.if_else(is_batch, numbers, pa.scalar(None, pa.int64()))
        owner_line = pc.fill_null_forward(batch_line_numbers)
        owner_base, owner_last = pc.fill_null_forward(base), pc.fill_null_forward(last)
        belongs = pc.and_kleene(
            pc.and_kleene(pc.greater_equal(record_offset, owner_base), pc.less_equal(record_offset, owner_last)),
            pc.equal(record_type, "CreateTime"),
        )
        belongs = pc.fill_null(belongs, False).to_numpy(zero_copy_only=False)

        first_record = pc.fill_null(pc.equal(next_offset, base), False)
        single = pc.fill_null(pc.equal(records, 1), False)
        null_str, null_long = pa.scalar(None, pa.string()), pa.scalar(None, pa.int64())
        send_type = pc.if_else(first_record, next_type, pc.if_else(single, batch_type, null_str))
        send_ms = pc.if_else(first_record, next_ms, pc.if_else(single, batch_ms, null_long))
        in_range = pc.fill_null(pc.and_(pc.greater_equal(send_ms, MIN_MS), pc.less_equal(send_ms, MAX_MS)), False)
        t_send = pc.if_else(in_range, pc.multiply(send_ms, 1000), null_long).cast(pa.timestamp("us", tz="UTC"))

        def mask(values: pa.Array) -> np.ndarray:
            return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)

        batch_rows, record_rows = mask(is_batch), mask(is_record)
        errors = read_error.to_numpy(zero_copy_only=False)
        has_error = mask(pc.is_valid(read_error))
        # a batch line's reason, the first that applies in this order: read error, no partition, no first
        # record, not a CreateTime, outside the plausible range (assigned last to first)
        types = send_type.to_numpy(zero_copy_only=False)
        reason = np.full(n, None, dtype=object)
        reason[~mask(in_range)] = OUTSIDE_RANGE
        for other in ("LogAppendTime", "NoTimestampType"):
            reason[types == other] = f"timestamps are {other}, not the producer's CreateTime"
        reason[mask(pc.is_null(send_type))] = NO_FIRST_RECORD
        reason[mask(pc.is_null(partition))] = NO_PARTITION
        reason[has_error] = errors[has_error]
        status = np.where(reason == None, "parsed", "quarantined").astype(object)  # noqa: E711 (elementwise)
        detail = reason.copy()
        status[~batch_rows] = np.where(has_error, "quarantined", "unused")[~batch_rows]
        other_detail = np.where(has_error, errors, np.where(record_rows, "record", "other"))
        detail[~batch_rows] = other_detail[~batch_rows]
        status_arr = pa.array(status, pa.string())
        quarantined = pc.equal(status_arr, "quarantined")

        record_sends, keyed_records = self._record_sends(
            n, belongs, owner_line, numbers, record_ms, records32, send_ms, key_size
        )
        out = pa.table(
            {
                "line_number": numbers,
                "line": pc.if_else(quarantined, line, null_str),
                "status": status_arr,
                "detail": pa.array(detail, pa.string()),
                "topic": topic,
                "partition": partition,
                "base_offset": base,
                "records": records32,
                "leader_epoch": pc.if_else(
                    pc.fill_null(pc.greater_equal(epoch, 0), False), epoch, pa.scalar(None, pa.int32())
                ),
                "t_send": t_send,
                "record_sends": record_sends,
                "keyed_records": keyed_records,
            }
        )
        section_after = section[n - 1].as_py() if n else self._section
        return out, section_after

    @staticmethod
    def _record_sends(
        n, belongs, owner_line, numbers, record_ms, records, send_ms, key_size
    ) -> tuple[pa.Array, pa.Array]:
        """Per batch line whose record lines all follow it: each record's CreateTime as ms after the
        batch's first, with how many records share it, in time order, and how many of its records have a key
        (null where a record line shows no keySize); both null otherwise."""
        rows = np.flatnonzero(belongs)
        if len(rows) == 0:
            return pa.nulls(n, RECORD_SENDS), pa.nulls(n, pa.int32())
        owners = np.asarray(owner_line.to_numpy(zero_copy_only=False)[rows], dtype=np.int64)
        ms = np.asarray(record_ms.to_numpy(zero_copy_only=False)[rows], dtype=np.int64)
        sizes = np.asarray(pc.fill_null(key_size, -2).to_numpy(zero_copy_only=False)[rows], dtype=np.int64)
        order = np.lexsort((ms, owners))
        owners, ms, sizes = owners[order], ms[order], sizes[order]
        # (batch, ms) pairs with their record counts, then the batches
        pair_starts = np.flatnonzero(np.r_[True, (owners[1:] != owners[:-1]) | (ms[1:] != ms[:-1])])
        pair_counts = np.diff(np.r_[pair_starts, len(owners)])
        pair_owner, pair_ms = owners[pair_starts], ms[pair_starts]
        group_starts = np.flatnonzero(np.r_[True, pair_owner[1:] != pair_owner[:-1]])
        group_pairs = np.diff(np.r_[group_starts, len(pair_owner)])
        group_records = np.add.reduceat(pair_counts, group_starts)
        batch_row = np.searchsorted(np.asarray(numbers.to_numpy(zero_copy_only=False)), pair_owner[group_starts])
        expected = np.asarray(pc.fill_null(records, -1).to_numpy(zero_copy_only=False), dtype=np.int64)[batch_row]
        complete = group_records == expected  # every record of the batch has its line
        first_ms = pc.fill_null(send_ms, 0).to_numpy(zero_copy_only=False)[batch_row]
        first_known = pc.is_valid(send_ms).to_numpy(zero_copy_only=False)[batch_row]
        keep = np.repeat(complete, group_pairs)
        after = pair_ms - np.repeat(first_ms, group_pairs)
        after_valid = np.repeat(first_known, group_pairs) & (after >= -(2**31)) & (after < 2**31)
        values = pa.StructArray.from_arrays(
            [
                pa.array(np.where(after_valid, after, 0)[keep].astype(np.int32), mask=~after_valid[keep]),
                pa.array(pair_counts[keep].astype(np.int32)),
            ],
            fields=list(RECORD_SENDS.value_type),
        )
        # per batch (in the order of `owners`): its records with a key, and whether every record showed its keySize
        batch_starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        keyed = np.add.reduceat((sizes >= 0).astype(np.int64), batch_starts)
        key_known = np.minimum.reduceat((sizes >= -1).astype(np.int64), batch_starts).astype(bool)
        keyed_records = np.zeros(n, dtype=np.int32)
        keyed_valid = np.zeros(n, dtype=bool)
        keyed_records[batch_row[complete]] = keyed[complete]
        keyed_valid[batch_row[complete]] = key_known[complete]
        lengths = np.zeros(n, dtype=np.int32)
        lengths[batch_row[complete]] = group_pairs[complete]
        offsets = np.r_[0, np.cumsum(lengths)].astype(np.int32)
        has_list = np.zeros(n, dtype=bool)
        has_list[batch_row[complete]] = True
        return (
            pa.ListArray.from_arrays(pa.array(offsets), values, type=RECORD_SENDS, mask=pa.array(~has_list)),
            pa.array(keyed_records, pa.int32(), mask=~keyed_valid),
        )


def fold_unused_lines(classified: pa.Table) -> pa.Table:
    """`classified` (`CLASSIFIED_SCHEMA`) with its unused lines folded into one row per detail: `lines` says
    how many lines a row stands for (1 for every other row) and `line_number` is the last of them.

    Most lines of a dump are record lines, which no table keeps: folded, only the rows a table needs reach
    Spark, and the counts still reconcile line for line (every line is in some row's `lines`, and a file's
    last line number is still among the rows)."""
    unused = pc.equal(classified["status"], "unused")
    kept = classified.filter(pc.invert(unused))
    kept = kept.append_column("lines", pa.repeat(pa.scalar(1, pa.int64()), kept.num_rows))
    folded = classified.filter(unused).group_by("detail").aggregate([("line_number", "max"), ("line_number", "count")])
    n = folded.num_rows
    columns = {
        "line_number": folded["line_number_max"],
        "status": pa.repeat(pa.scalar("unused", pa.string()), n),
        "detail": folded["detail"],
        "lines": folded["line_number_count"].cast(pa.int64()),
    }
    rows = pa.table({f.name: columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in FOLDED_SCHEMA})
    return pa.concat_tables([kept.cast(FOLDED_SCHEMA), rows.cast(FOLDED_SCHEMA)])
