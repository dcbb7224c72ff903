"""Pseudonymise identities: principals and client ids can name people or services.

A keyed (salted) SHA-256 keeps each value distinct and stable across runs with the same salt, so
group-bys and joins on the hashed column still work, while the clear value cannot be recovered
without the salt (a bare hash of a short client id could be reversed by trying candidates).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# Columns of the silver/gold tables that carry a principal, client id, transactional id or a client's
# address (a PRODUCE's `connection` holds the client's IP and port).
IDENTITY_COLUMNS = ("principal", "client_id", "transactional_id", "connection")


def salted_sha256(col: Column, salt: str) -> Column:
    """Hex SHA-256 of `salt + ':' + value`; null stays null (no identity to hide)."""
    if not salt:
        raise ValueError("privacy: the salt must not be empty (an unsalted hash of a client id can be guessed)")
    return F.when(col.isNull(), F.lit(None).cast("string")).otherwise(
        F.sha2(F.concat(F.lit(salt + ":"), col.cast("string")), 256)
    )


def with_hashed_identities(df: DataFrame, salt: str, columns: tuple[str, ...] = IDENTITY_COLUMNS) -> DataFrame:
    """Replace the identity columns present in `df` by their salted SHA-256 (others untouched)."""
    present = [name for name in columns if name in df.columns]
    if not present:
        return df
    return df.withColumns({name: salted_sha256(F.col(name), salt) for name in present})
