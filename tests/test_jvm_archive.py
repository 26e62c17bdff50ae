"""The class-data-sharing archive of the ZooKeeper JVM, on the real JVM: recorded by a first
start, dumped from the settled record, then mapped (``-Xshare:on`` fails unless the JVM really
maps it); a record cut short is dropped, never used; a change of flags is another archive."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from dbs.jvm_archive import SETTLED, JvmArchive
from dbs.zookeeper import JVM_FLAGS, SLF4J_SIMPLE_JAR, ZOOKEEPER_JAR

JAVA = shutil.which("java")
pytestmark = [pytest.mark.servers,
              pytest.mark.skipif(JAVA is None or not Path(ZOOKEEPER_JAR).exists(),
                                 reason="java or zookeeper missing: run `bash setup.sh`")]
CP = [ZOOKEEPER_JAR, SLF4J_SIMPLE_JAR]
MAIN = "org.apache.zookeeper.version.VersionInfoMain"  # loads ZooKeeper's classes, exits


def java(*flags: str) -> subprocess.CompletedProcess[str]:
    assert JAVA is not None
    return subprocess.run([JAVA, *flags, *JVM_FLAGS, "-cp", ":".join(CP), MAIN],
                          capture_output=True, text=True, timeout=60)


def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str
            ) -> JvmArchive:
    """The archive of a cache in ``tmp_path`` holding one settled class list ``text``."""
    monkeypatch.setenv("LOCK_HARNESS_CDS", str(tmp_path))
    assert JAVA is not None
    archive = JvmArchive("zookeeper", JAVA, CP, JVM_FLAGS)
    (tmp_path / f"{archive.stem}.{name}.lst").write_text(text)
    settle(tmp_path)
    return archive


def settle(directory: Path) -> None:
    old = time.time() - SETTLED - 5
    for lst in directory.glob("*.lst"):
        os.utime(lst, (old, old))


def test_recorded_then_dumped_then_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    monkeypatch.setenv("LOCK_HARNESS_CDS", str(tmp_path))
    assert JAVA is not None
    archive = JvmArchive("zookeeper", JAVA, CP, JVM_FLAGS)
    assert archive.flags_for(first_node=False) == []  # only the first node records
    record = archive.flags_for(first_node=True)
    assert len(record) == 1 and record[0].startswith("-XX:DumpLoadedClassList=")
    assert java(*record).returncode == 0
    assert JvmArchive("zookeeper", JAVA, CP, JVM_FLAGS).flags_for(True) == []  # not settled
    settle(tmp_path)
    mapped = JvmArchive("zookeeper", JAVA, CP, JVM_FLAGS).flags_for(first_node=False)
    assert mapped == [f"-XX:SharedArchiveFile={archive.archive}"]
    assert not list(tmp_path.glob("*.lst")) and not list(tmp_path.glob("*.tmp"))
    done = java("-Xshare:on", *mapped)  # -Xshare:on: exit 1 if the archive is not mapped
    assert done.returncode == 0, done.stderr
    assert "version 3." in done.stdout
    # Other flags: another archive, recorded afresh.
    other = JvmArchive("zookeeper", JAVA, CP, [*JVM_FLAGS, "-Xmx128m"])
    assert other.archive != archive.archive
    assert other.flags_for(True)[0].startswith("-XX:DumpLoadedClassList=")


def test_an_unusable_record_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    archive = planted(tmp_path, monkeypatch, "2", "not a class list @@@ id: x\n")
    flags = archive.flags_for(first_node=True)
    assert archive.archive is not None and not archive.archive.exists()
    assert not list(tmp_path.glob("*.2.lst"))  # unusable: dropped, and recorded anew
    assert flags[0].startswith("-XX:DumpLoadedClassList=")
    assert java(*flags).returncode == 0


def test_a_record_cut_short_still_gives_an_archive_the_jvm_maps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A node killed while recording leaves a list cut mid-line: the JVM dumps what it can
    # read, and the archive is as valid as any (only smaller).
    archive = planted(tmp_path, monkeypatch, "1", "java/lang/Object id: 0\njava/lang/Str")
    flags = archive.flags_for(first_node=False)
    assert flags == [f"-XX:SharedArchiveFile={archive.archive}"]
    done = java("-Xshare:on", *flags)
    assert done.returncode == 0, done.stderr


def test_off_adds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCK_HARNESS_CDS", "off")
    assert JAVA is not None
    assert JvmArchive("zookeeper", JAVA, CP, JVM_FLAGS).flags_for(True) == []
