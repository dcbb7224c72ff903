"""The worker daemon's zip importer: an unchanged archive's index is not read again before each task, a
changed one is; the test session's Python workers run with it (tests/conftest.py, conf/local.yaml)."""

from __future__ import annotations

import sys
import zipfile
import zipimport

import pytest

from ackreplay.spark_daemon import keep_unchanged_zip_indexes


def _zip(path, *modules: str) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name in modules:
            archive.writestr(f"{name}.py", f"NAME = {name!r}\n")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12+ re-reads lazily itself (CPython gh-103200)")
def test_an_unchanged_archive_keeps_its_index_and_a_changed_one_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches)
    path = tmp_path / "code.zip"
    _zip(path, "alpha")
    importer = zipimport.zipimporter(str(path))
    keep_unchanged_zip_indexes()
    importer.invalidate_caches()  # the first call reads (this process had not recorded the archive)
    index = importer._files
    importer.invalidate_caches()
    assert importer._files is index  # not read again
    _zip(path, "alpha", "beta")  # a new size: read again
    importer.invalidate_caches()
    assert importer._files is not index and sorted(importer._files) == ["alpha.py", "beta.py"]


def test_the_session_workers_run_the_daemon_of_this_module(spark):
    def patched(_):
        import zipimport

        return [getattr(zipimport.zipimporter.invalidate_caches, "keeps_unchanged", False)]

    flags = spark.sparkContext.parallelize(range(4), 4).mapPartitions(patched).collect()
    assert flags == [sys.version_info < (3, 12)] * 4
