"""Every column of every lakehouse table's contract (schemas/) carries a description in its metadata, {"comment": ...},
which Delta stores as the column's comment (DESCRIBE shows it), and every table a description of its own. The
contracts only: no Spark session."""

from __future__ import annotations

from collections import Counter

import pytest

from ackreplay.storage.lakehouse import TABLES, table_contract

MAX_COMMENT = 200
# (table, description) pairs that may name more than one column: columns that are genuinely the same thing
SHARED: frozenset[tuple[str, str]] = frozenset()


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_column_of_a_contract_has_its_own_short_description(table):
    comments = {f.name: f.metadata.get("comment") for f in table_contract(table).fields}
    missing = [name for name, text in comments.items() if not isinstance(text, str) or not text.strip()]
    assert not missing, f"{table}: columns without a description: {missing}"
    long = {name: len(text) for name, text in comments.items() if len(text) > MAX_COMMENT}
    assert not long, f"{table}: descriptions longer than {MAX_COMMENT} characters: {long}"
    repeated = [text for text, n in Counter(comments.values()).items() if n > 1 and (table, text) not in SHARED]
    assert not repeated, f"{table}: one description for several columns: {repeated}"
    assert 0 < len(TABLES[table].description) <= 2 * MAX_COMMENT, f"{table}: its own description"
