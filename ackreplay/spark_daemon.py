"""PySpark's Python worker daemon (`pyspark.daemon`), with the zip importer of Python 3.10 and 3.11 made to
re-read an archive's index only when the archive has changed.

Before every task a PySpark worker calls `importlib.invalidate_caches()` (`pyspark.worker.setup_spark_files`).
On Python 3.10 and 3.11 that re-reads, in Python, the whole index of every zip on the worker's `sys.path`
(`zipimport.zipimporter.invalidate_caches`), and PySpark puts three there: pyspark.zip, py4j's zip and
spark-core's jar, 6,700 entries. That is about 70 ms of every Python task (mapInArrow, the replay's grouped
functions, UDFs) on a 2-core machine: 4.5 s for 66 tasks that do nothing. Python 3.12 made the re-read lazy
(CPython gh-103200, "zipimport.invalidate_caches() implementation causes performance regression"); this
module does the same for the older versions, keyed on each archive's size and modification time, so an
archive that changes is still read again.

A Spark setting chooses it: `spark.python.daemon.module: ackreplay.spark_daemon` (conf/local.yaml). The
daemon starts before any task has shipped code, so the worker's Python must have ackreplay installed: true
of local sessions; on a cluster only where ackreplay is installed on the workers (not with `--py-files`).
"""

from __future__ import annotations

import os
import sys
import zipimport


def keep_unchanged_zip_indexes() -> None:
    """Make `zipimporter.invalidate_caches` re-read an archive's index only when its size or mtime changed."""
    if sys.version_info >= (3, 12) or getattr(zipimport.zipimporter.invalidate_caches, "keeps_unchanged", False):
        return
    reread = zipimport.zipimporter.invalidate_caches
    read_at: dict[str, tuple[int, int]] = {}

    def signature(archive: str) -> tuple[int, int] | None:
        try:
            stat = os.stat(archive)
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    # the indexes this process has read already (CPython's private cache, which the patch exists for)
    for archive in list(zipimport._zip_directory_cache):  # type: ignore[attr-defined]
        if (current := signature(archive)) is not None:
            read_at[archive] = current

    def invalidate_caches(self) -> None:
        current = signature(self.archive)
        if current is None or read_at.get(self.archive) != current:
            reread(self)
            if current is not None:
                read_at[self.archive] = current

    invalidate_caches.keeps_unchanged = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]


if __name__ == "__main__":
    keep_unchanged_zip_indexes()
    from pyspark.daemon import manager

    manager()
