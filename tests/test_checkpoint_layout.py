"""The checkpoint tests' own arithmetic (no Spark): `checkpoint_queries.retention_report`
decides what a store directory must hold for its last N versions, from manifests written
with the provider's manifest writer, and the aggregation model and file-name helpers.
"""

from __future__ import annotations

import pathlib
import re

import checkpoint_queries as cq
from ttlstate import manifest


def _manifest(d: pathlib.Path, version: int, ssts: list[str]):
    files = tuple(manifest.SstFile(name=n, local=f"{i:06d}.sst", size=3, crc32=0)
                  for i, n in enumerate(ssts))
    manifest.write(str(d / f"{version}.manifest"),
                   manifest.Manifest(version=version, num_keys=1, layout=0, db_ttl=False,
                                     ssts=files))


def _touch(d: pathlib.Path, *names):
    for n in names:
        p = d / n
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"abc")


def test_changelog_mode_report(tmp_path):
    d = tmp_path / "store"
    d.mkdir()
    _manifest(d, 3, ["1-a.sst", "2-b.sst"])
    _manifest(d, 6, ["2-b.sst", "3-c.sst"])
    _manifest(d, 9, ["3-c.sst", "4-d.sst"])
    _touch(d, *[f"{v}.changelog" for v in range(1, 11)],
           "sst/1-a.sst", "sst/2-b.sst", "sst/3-c.sst", "sst/4-d.sst")
    r = cq.retention_report(d, 5)  # latest 10: needs 6..10, base = 6
    assert (r["latest"], r["base"]) == (10, 6)
    # the base's own changelog stays: version 6 is retained, its change feed reads it
    assert r["expected"] == sorted(["6.manifest", "9.manifest", "6.changelog", "7.changelog",
                                    "8.changelog", "9.changelog", "10.changelog",
                                    "sst/2-b.sst", "sst/3-c.sst", "sst/4-d.sst"])
    assert r["extra"] == sorted(["3.manifest", "sst/1-a.sst"]
                                + [f"{v}.changelog" for v in range(1, 6)])
    assert not r["missing"] and all(r["loadable"].values()) and not r["ok"]
    for f in r["extra"]:
        (d / f).unlink()
    assert cq.retention_report(d, 5)["ok"]
    # a missing SST of a retained manifest, a missing changelog, a temp file
    (d / "sst/4-d.sst").unlink()
    r = cq.retention_report(d, 5)
    assert r["missing"] == ["sst/4-d.sst"] and not r["ok"]
    assert r["loadable"] == {6: True, 7: True, 8: True, 9: True, 10: True}  # from 6.manifest
    _touch(d, "sst/4-d.sst")
    (d / "8.changelog").unlink()
    r = cq.retention_report(d, 5)
    assert r["missing"] == [] and r["loadable"][8] is False and r["loadable"][9] is True
    assert not r["ok"]
    _touch(d, "8.changelog", ".11.manifest.0d0c1e6a-5d5f-4f7e-9d1f-3e0e2b7c9a11.tmp")
    assert cq.retention_report(d, 5)["extra"] == [
        ".11.manifest.0d0c1e6a-5d5f-4f7e-9d1f-3e0e2b7c9a11.tmp"]


def test_no_manifest_keeps_every_changelog_and_crc_files_follow_their_file(tmp_path):
    d = tmp_path / "store"
    d.mkdir()
    _touch(d, *[f"{v}.changelog" for v in range(1, 5)], ".3.changelog.crc", ".9.changelog.crc",
           "_metadata/schema")  # Spark's schema file in partition 0: not the store's
    r = cq.retention_report(d, 2)
    assert r["base"] == 0 and r["extra"] == [".9.changelog.crc"]
    assert set(r["expected"]) == {"1.changelog", "2.changelog", "3.changelog", "4.changelog",
                                  ".3.changelog.crc"}


def test_snapshot_mode_report(tmp_path):
    d = tmp_path / "store"
    d.mkdir()
    for v in range(1, 8):
        _manifest(d, v, [f"{v}-x.sst", f"{v + 1}-x.sst"])
        _touch(d, f"sst/{v}-x.sst")
    _touch(d, "sst/8-x.sst", "sst/99-orphan.sst")
    r = cq.retention_report(d, 2)
    assert r["base"] == 6
    assert r["expected"] == sorted(["6.manifest", "7.manifest", "sst/6-x.sst", "sst/7-x.sst",
                                    "sst/8-x.sst"])
    assert "sst/99-orphan.sst" in r["extra"] and "5.manifest" in r["extra"]


def test_helpers(tmp_path):
    rows, states = cq.model_sum_by_key([[("a", 1), ("b", 2), ("a", 3)], [("b", 5)]])
    assert rows == {0: [("a", 2, 4), ("b", 1, 2)], 1: [("b", 2, 7)]}
    assert states[1] == {"a": (2, 4), "b": (2, 7)}
    assert cq.faulty("/tmp/x") == "faulty:///tmp/x"
    assert cq.local_path("faulty:///tmp/x") == pathlib.Path("/tmp/x")
    assert cq.local_path("file:///tmp/x") == pathlib.Path("/tmp/x")
    assert cq.V2_CHANGELOG.match("4_0b5e-aa_0.changelog")
    assert cq.V2_MANIFEST.match("4_0b5e-aa.manifest")
    part = tmp_path / "ck" / "state" / "0" / "0"
    _touch(part / "left-keyToNumValues", "1_a_0.changelog")
    _touch(part / "right-keyToNumValues", "1_b_0.changelog")
    assert sorted(cq.store_dirs(tmp_path / "ck")) == ["0/left-keyToNumValues",
                                                      "0/right-keyToNumValues"]
    assert cq.version_files(part / "left-keyToNumValues", 1) == ["1_a_0.changelog"]
    rx = re.compile(cq.STORE_FILES_REGEX)
    assert rx.search("/x/ck/state/0/3/sst/1-a.sst") and rx.search("/x/ck/state/1/0/4.changelog")
    assert not rx.search("/x/ck/state/0/0/_metadata/schema")


def test_v2_report_follows_base_ids(tmp_path):
    d = tmp_path / "store"
    d.mkdir()
    manifest.write(str(d / "3_c3.manifest"),
                   manifest.Manifest(version=3, num_keys=1, layout=0, db_ttl=False,
                                     ssts=(manifest.SstFile("1-a.sst", "000001.sst", 3, 0),)))
    _touch(d, "sst/1-a.sst", "1_c1_0.changelog", "2_c2_c1.changelog", "3_c3_c2.changelog",
           "4_c4_c3.changelog", "4_x4_c3.changelog",   # two attempts of version 4
           "5_c5_c4.changelog", "2_old_c1.changelog")  # an attempt that lost, long ago
    r = cq.retention_report(d, 2)  # latest 5: needs 4, 5; base = 3_c3
    assert (r["latest"], r["base"]) == (5, 3)
    assert r["expected"] == sorted(["3_c3.manifest", "4_c4_c3.changelog", "4_x4_c3.changelog",
                                    "5_c5_c4.changelog", "sst/1-a.sst"])
    assert r["extra"] == sorted(["1_c1_0.changelog", "2_c2_c1.changelog", "2_old_c1.changelog",
                                 "3_c3_c2.changelog"])
    assert r["loadable"] == {4: True, 5: True}
    (d / "4_c4_c3.changelog").unlink()  # 5_c5 names c4 as its base: the lineage is broken
    assert cq.retention_report(d, 2)["loadable"] == {4: True, 5: False}


def test_v2_report_follows_the_committed_lineage_past_a_losing_manifest(tmp_path):
    """A losing attempt of version 4 was snapshotted (4_l4.manifest) while the committed
    lineage 5_c5 -> 4_c4 -> 3_c3 starts from 3_c3.manifest: both must stay."""
    d = tmp_path / "ck" / "state" / "0" / "0"
    d.mkdir(parents=True)
    for name, sst in (("3_c3.manifest", "1-a.sst"), ("4_l4.manifest", "2-b.sst")):
        v = int(name.split("_")[0])
        manifest.write(str(d / name), manifest.Manifest(
            version=v, num_keys=1, layout=0, db_ttl=False,
            ssts=(manifest.SstFile(sst, "000001.sst", 3, 0),)))
    _touch(d, "sst/1-a.sst", "sst/2-b.sst", "4_l4_c3.changelog", "4_c4_c3.changelog",
           "5_c5_c4.changelog")
    commits = tmp_path / "ck" / "commits"
    commits.mkdir()
    for batch, uid in ((3, "c4"), (4, "c5")):
        (commits / str(batch)).write_text(
            'v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[["%s"]]}}\n' % uid)
    assert cq.committed_ids(tmp_path / "ck") == {"0": {4: "c4", 5: "c5"}}
    r = cq.retention_reports(tmp_path / "ck", 2)["0"]
    assert r["ok"], cq.short_report({"0": r})
    assert r["base"] == 3 and "3_c3.manifest" in r["expected"] and "sst/1-a.sst" in r["expected"]
    (d / "3_c3.manifest").unlink()  # what a version-number base (4) would have deleted
    r = cq.retention_reports(tmp_path / "ck", 2)["0"]
    assert r["loadable"] == {4: False, 5: False} and not r["ok"]


def test_a_partition_holding_both_providers_files_has_one_default_store(tmp_path):
    """After a migration between Spark's RocksDB provider and ttlstate (or a killed one), a
    default store's directory holds `sst/` (ttlstate's) and `SSTs/` (the RocksDB provider's):
    neither is a store of its own; a join's store subdirectories are."""
    from ttlstate import checkpoint_reader

    for d in ("sst", "SSTs", "left-keyToNumValues"):
        (tmp_path / d).mkdir()
    (tmp_path / "3.changelog").write_bytes(b"")
    (tmp_path / "3.zip").write_bytes(b"")
    assert checkpoint_reader._store_names(str(tmp_path)) == {"default", "left-keyToNumValues"}
