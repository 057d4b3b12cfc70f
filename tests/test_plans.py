"""`PLAN` (docs/PROTOCOL.md): a worker plans a store's loads, replays, change feeds and cleanup
passes over the listing the JVM sent (`ttlstate.plans`, on `layout` and `retention`). The
layout vectors (`tests/vectors/layout_plans.tsv`, `layout_replays.tsv`) are read here through
the handler's pure function `plans.answer`, and the cases of the JVM's former planners'
tests (LoadPlanTest, RetentionTest, and ListingGateTest's runs with the real rule) are ported onto it. The last tests send
PLAN frames to a real worker process."""

from __future__ import annotations

import pathlib

import pytest

from ttlstate import layout, plans, retention
from ttlstate import protocol as p
from ttlstate.errors import TtlstateError

VECTORS = pathlib.Path(__file__).parent / "vectors"
MIN = -(1 << 63)


def _rows(name: str):
    for line in (VECTORS / name).read_text().splitlines():
        if line and not line.startswith("#"):
            yield line.split("\t")


def _files(text: str) -> list[tuple[str, int]]:
    """A listing of the vectors' form (`name@mtime` items, or `-`) as PLAN sends it."""
    return [] if text == "-" else [(n, int(t)) for n, _, t in (i.partition("@") for i in text.split(" "))]


def v1(last: int, *manifests: int) -> list[tuple[str, int]]:
    """Format v1: changelogs 1..last (mtime 1000 v) and manifests at `manifests` (1000 v + 500)."""
    return ([(f"{v}.changelog", 1000 * v) for v in range(1, last + 1)]
            + [(f"{v}.manifest", 1000 * v + 500) for v in manifests])


def load(files, version, id="", v2=False):
    return plans.answer(p.PLAN_LOAD, v2, version, id, 0, 0, 0, 0, files)


def from_snapshot(files, snapshot, version, id="", v2=False):
    return plans.answer(p.PLAN_FROM_SNAPSHOT, v2, version, id, snapshot, 0, 0, 0, files)


def changes(files, first, version, id="", v2=False):
    return plans.answer(p.PLAN_CHANGELOGS, v2, version, id, first, 0, 0, 0, files)


def keep(files, retain, min_delete=0, max_delete=-1, v2=False) -> plans.Kept:
    return plans.answer(p.PLAN_RETENTION, v2, 0, "", 0, retain, min_delete, max_delete, files)


def render(a, files) -> str:
    """An answer as the layout vectors write outcomes: `<manifest or ->|<changelogs>` or `MISSING <pattern>`."""
    if isinstance(a, plans.Missing):
        return f"MISSING {a.pattern}"
    assert isinstance(a, plans.Planned), a
    for index, version in a.changelogs:
        assert layout.parse(files[index][0]).version == version
    return ((files[a.manifest][0] if a.manifest >= 0 else "-") + "|"
            + ",".join(files[i][0] for i, _ in a.changelogs))


def names(indices, files) -> list[str]:
    """The names of listing entries given by index, or by (index, version) as retained manifests are."""
    return [files[i if isinstance(i, int) else i[0]][0] for i in indices]


def versions(indices, files) -> set[int]:
    return {layout.parse(files[i][0]).version for i in indices}


def without(files, indices) -> list[tuple[str, int]]:
    gone = set(indices)
    return [f for i, f in enumerate(files) if i not in gone]


# -- the layout vectors, through the handler -----------------------------------------------

@pytest.mark.parametrize("row", list(_rows("layout_plans.tsv")), ids=lambda r: r[0])
def test_plan_answers_loads_as_the_vectors_say(row):
    case, fmt, listing, version, id, expected = row
    files = _files(listing)
    a = load(files, int(version), "" if id == "-" else id, v2=fmt == "v2")
    assert render(a, files) == expected, case
    if isinstance(a, plans.Planned):
        assert a.later == tuple((i, layout.parse(n).version, n.endswith(".manifest")) for i, (n, _) in enumerate(files)
                                if layout.parse(n).id is None and layout.parse(n).version > int(version))
        if fmt == "v1" or version == "0":
            assert a.id is None
        else:  # the id asked, or the newest file's
            assert a.id == id if id != "-" else a.id is not None


@pytest.mark.parametrize("row", list(_rows("layout_replays.tsv")), ids=lambda r: r[0])
def test_plan_answers_replays_and_change_ranges_as_the_vectors_say(row):
    case, fmt, listing, kind, first, version, id, expected = row
    files = _files(listing)
    plan = from_snapshot if kind == "snapshot" else changes
    a = plan(files, int(first), int(version), "" if id == "-" else id, v2=fmt == "v2")
    if isinstance(a, plans.NoChangelog):
        # checked before the plan: the version has a snapshot and no changelog, which the
        # plan alone reports as the changelog missing
        assert expected == f"MISSING {layout.name(a.version, layout.CHANGELOG)}", case
        assert f"{a.version}.manifest" in dict(files)
        return
    assert render(a, files) == expected, case
    if kind == "changes" and isinstance(a, plans.Planned):
        assert a.manifest == -1 and a.manifest_version == 0 and a.later == ()


def test_the_replay_vectors_reach_no_changelog_through_the_handler():
    outcomes = [type(from_snapshot(_files(r[2]), int(r[4]), int(r[5]), v2=r[1] == "v2")
                     if r[3] == "snapshot" else changes(_files(r[2]), int(r[4]), int(r[5]), v2=r[1] == "v2"))
                for r in _rows("layout_replays.tsv") if r[6] == "-"]
    assert plans.NoChangelog in outcomes and plans.Planned in outcomes and plans.Missing in outcomes


# -- LoadPlanTest ----------------------------------------------------------------------

def test_a_plan_names_its_manifest_then_its_changelogs_and_later_v1_files():
    files = v1(5, 2, 4)
    a = load(files, 5)
    assert (a.manifest_version, names([a.manifest], files), names([i for i, _ in a.changelogs], files)) == \
        (4, ["4.manifest"], ["5.changelog"])
    assert a.changelogs == ((4, 5),) and a.id is None and a.later == ()
    assert load(files, 0) == plans.Planned(None, 0, -1, (), ((0, 1, False), (1, 2, False), (2, 3, False),
                                                             (3, 4, False), (4, 5, False), (5, 2, True),
                                                             (6, 4, True)))
    # an earlier attempt's files above the version, in listing order; v2 files are not among them
    files = v1(3, 2) + [("4_a_b.changelog", 1), ("5.manifest", 2)]
    assert load(files, 2).later == ((2, 3, False), (5, 5, True))


def test_a_replay_from_a_snapshot_after_the_version_or_before_zero_is_refused():
    for snapshot in (4, -1):
        with pytest.raises(TtlstateError, match="cannot replay version 3"):
            from_snapshot(v1(3, 2), snapshot, 3)


def test_the_plan_id_is_the_versions_in_v2_none_in_v1():
    files = [("1_a_0.changelog", 1), ("2_b_a.changelog", 5), ("2_x_a.changelog", 3), ("2_b.manifest", 6)]
    assert load(files, 2, v2=True).id == "b"  # the newest file's
    assert load(files, 2, "x", v2=True).id == "x"
    assert load(files, 0, v2=True).id is None
    assert from_snapshot(files, 1, 2, v2=True) == plans.Missing(
        "1_a.manifest", "There is no snapshot of version 1 ({path} does not exist; needed to replay version 2"
                        " from it): snapshots of this store are at versions [2]")
    assert from_snapshot(files, 2, 2, v2=True) == plans.Planned("b", 2, 3, (), ())
    assert from_snapshot(files, 0, 2, "x", v2=True) == plans.Planned("x", 0, -1, ((0, 1), (2, 2)), ())
    assert changes(files, 2, 2, v2=True) == plans.Planned("b", 0, -1, ((1, 2),), ())


def test_equal_times_pick_the_greatest_name_as_javas_newer_than():
    """Java's StateFileName.newerThan: the later mtime, else the greater name."""
    files = [("1_a_0.changelog", 1), ("2_x_a.changelog", 7), ("2_b_a.changelog", 7), ("2_c_a.changelog", 6)]
    assert load(files, 2, v2=True).id == "x"
    files[2] = ("2_b_a.changelog", 8)
    assert load(files, 2, v2=True).id == "b"
    # milliseconds apart are apart: each is a million nanoseconds to layout
    assert load([("1_a_0.changelog", 1), ("1_b_0.changelog", 2)], 1, v2=True).id == "b"


def test_names_the_listing_does_not_parse_are_skipped_but_keep_their_indices():
    files = [("5.zip", 1), ("notes-é.txt", 2), ("1.changelog", 3), ("sst", 4), ("2.changelog.crc", 5),
             ("2.changelog", 6), ("2_b.manifest.tmp", 7)]
    assert load(files, 2) == plans.Planned(None, 0, -1, ((2, 1), (5, 2)), ())


def test_missing_files_are_named_as_the_jvm_names_them():
    assert load(v1(3)[1:], 3) == plans.Missing(
        "1.changelog", "State file {path} of version 1 does not exist (needed to load version 3)")
    assert load([("1_a_0.changelog", 1)], 2, v2=True) == plans.Missing(
        "2_*", "State file {path} of version 2 does not exist (needed to load version 2)")
    assert load([("1_a_0.changelog", 1), ("2_b_a.changelog", 2)], 2, "zz", v2=True).pattern == "2_zz_*.changelog"
    assert changes([("3_c_b.changelog", 1)], 2, 3, v2=True) == plans.Missing(
        "2_b_*.changelog", "State file {path} of version 2 does not exist (needed to load version 3)")
    # no manifest at all: the snapshot versions are an empty set
    assert from_snapshot(v1(3), 1, 3).message.endswith("snapshots of this store are at versions []")
    # both formats' manifests, each version once, ascending
    files = v1(9, 9, 4) + [("1_a.manifest", 1), ("4_b.manifest", 2)]
    assert from_snapshot(files, 2, 9) == plans.Missing(
        "2.manifest", "There is no snapshot of version 2 ({path} does not exist; needed to replay version 9"
                      " from it): snapshots of this store are at versions [1, 4, 9]")


def test_no_changelog_is_checked_first_and_names_the_first_such_version():
    """NoChangelogException.check: a version from `from` (a replay: the snapshot's + 1) to
    `version` with a manifest (either format) and no changelog (either format)."""
    snapshot_mode = [("1.manifest", 1), ("2.manifest", 2), ("3.manifest", 3)]
    assert changes(snapshot_mode, 1, 3) == plans.NoChangelog(1)
    assert changes(snapshot_mode, 2, 3) == plans.NoChangelog(2)
    assert changes(snapshot_mode, 0, 3) == plans.NoChangelog(1)
    assert from_snapshot(snapshot_mode, 1, 3) == plans.NoChangelog(2)
    assert from_snapshot(snapshot_mode, 3, 3) == plans.Planned(None, 3, 2, (), ())  # batchId = snapshot
    assert load(snapshot_mode, 3) == plans.Planned(None, 3, 2, (), ())  # loads are not checked
    # a changelog of the other format counts; a v2 manifest counts
    assert changes([("1.changelog", 1), ("2_b_a.changelog", 2), ("2.manifest", 3)], 1, 2) == plans.Missing(
        "2.changelog", "State file {path} of version 2 does not exist (needed to load version 2)")
    assert changes([("1_a_0.changelog", 1), ("2_b.manifest", 2)], 1, 2, v2=True) == plans.NoChangelog(2)
    # versions outside the range do not count
    assert changes([("1.manifest", 1), ("2.changelog", 2), ("4.manifest", 4)], 2, 2) == \
        plans.Planned(None, 0, -1, ((1, 2),), ())
    # a replay's missing snapshot comes after the check
    assert from_snapshot([("1.changelog", 1), ("2.manifest", 2)], 1, 2) == plans.NoChangelog(2)


# -- RetentionTest -----------------------------------------------------------------------

def test_deletes_at_most_max_versions_a_pass_oldest_first():
    """Changelogs 1-100, manifests at 50 and 95, 10 versions to retain: one pass without a
    limit deletes versions 1-50; with maxVersionsToDelete 5 each pass deletes the 5 oldest stale
    versions, and the passes end where the unlimited one does (docs/decisions/094 (f))."""
    files = v1(100, 50, 95)
    assert versions(keep(files, 10).deletable, files) == set(range(1, 51))
    deleted: set[int] = set()
    passes = 0
    while (k := keep(files, 10, 0, 5)).deletable:
        now = versions(k.deletable, files)
        assert len(now) <= 5 and (not deleted or min(now) > max(deleted)), (passes, now)
        assert passes < 20
        deleted |= now
        files = without(files, k.deletable)
        passes += 1
    assert deleted == set(range(1, 51)) and passes == 10
    # a pass that leaves stale versions is not complete: the next one runs without a new file
    assert not keep(v1(100, 50, 95), 10, 0, 5).complete
    assert keep(v1(100, 50, 95), 10, 0, -1).complete
    assert keep(v1(100, 50, 95), 10, 0, 0).complete  # 0: no limit either


def test_the_stale_versions_a_limited_pass_leaves_are_retained_with_their_manifests():
    files = v1(20, 5, 10, 16)
    k = keep(files, 5, 0, 3)
    assert versions(k.deletable, files) == {1, 2, 3}
    # 16.manifest (the base), then the versions left for the next pass in listing order
    assert names(k.retained_manifests, files) == ["16.manifest", "5.manifest", "10.manifest"]
    assert k.oldest_retained_ms == 4000 and not k.complete and k.keep_from == 16


def test_keeps_the_changelogs_of_retained_versions():
    """Changelogs 1-20, a manifest at 16, 5 versions to retain (keepFrom 16): 16.changelog
    stays, so the change feed of versions 16-20 still reads (docs/decisions/094 (g))."""
    files = v1(20, 16)
    k = keep(files, 5)
    assert k.keep_from == 16
    assert versions(k.deletable, files) == set(range(1, 16))
    assert all(files[i][0].endswith(".changelog") for i in k.deletable)
    after = without(files, k.deletable)
    assert isinstance(changes(after, 16, 20), plans.Planned)
    assert names(k.retained_manifests, files) == ["16.manifest"]


def test_deletes_nothing_below_min_versions_to_delete():
    files = v1(20, 16)
    k = keep(files, 5, 16)
    # nothing more turns stale until a new version is written: complete; everything retained
    assert k == plans.Kept(16, True, MIN, (), ((20, 16),))
    assert versions(keep(files, 5, 15).deletable, files) == set(range(1, 16))


def test_deletes_nothing_when_a_retained_version_cannot_be_loaded():
    files = [f for f in v1(20) if f[0] != "18.changelog"]
    assert keep(files, 5) == plans.Kept(16, False, MIN, (), ())  # planned again at the next maintenance
    # everything is retained: every manifest listed, of either format, in listing order
    files = files + [("3_a.manifest", 1), ("2.manifest", 2)]
    assert keep(files, 5) == plans.Kept(16, False, MIN, (), ((19, 3), (20, 2)))


def test_leaves_the_other_formats_files_alone():
    files = v1(20, 16) + [("1_a_0.changelog", 1)]
    k = keep(files, 5)
    assert all(layout.parse(files[i][0]).id is None for i in k.deletable)
    assert versions(k.deletable, files) == set(range(1, 16))
    files = v1(3, 1) + [("1_a_0.changelog", 1), ("2_b_a.changelog", 2), ("2_b.manifest", 3), ("3_c_b.changelog", 4)]
    k = keep(files, 1, v2=True)
    assert names(k.deletable, files) == ["1_a_0.changelog", "2_b_a.changelog"]  # keepFrom 3
    assert names(k.retained_manifests, files) == ["2_b.manifest"]


def test_the_oldest_retained_file_dates_sst_and_temp_deletion():
    """An SST or temp file goes only if older than every retained file (the JVM compares)."""
    k = keep(v1(20, 16), 5)
    assert k.oldest_retained_ms == 16_500  # 16.manifest
    assert keep([], 5) == plans.Kept(-4, True, MIN, (), ())  # nothing retained


def test_keep_from_counts_every_state_file_and_at_least_one_version():
    files = v1(3) + [("7_a_0.changelog", 1)]
    assert keep(files, 1).keep_from == 7  # latest: any state file's version
    assert keep(v1(3), 0).keep_from == 3 and keep(v1(3), -5).keep_from == 3
    # keepFrom below 1: every version is retained, 1.changelog too (its own plan starts at 1.manifest)
    k = keep(v1(3, 1), 10)
    assert k.keep_from == -6 and k.deletable == () and names(k.retained_manifests, v1(3, 1)) == ["1.manifest"]


def test_without_a_plan_every_manifest_of_the_format_is_below_the_oldest_start():
    """Java's oldest plan start is Long.MAX_VALUE when no version at or above keepFrom has a
    file of the format: then every manifest of the format no plan retains goes."""
    files = [("1.manifest", 1), ("2.changelog", 2), ("5_a_0.changelog", 3)]
    k = keep(files, 1)  # keepFrom 5: no v1 file there
    assert names(k.deletable, files) == ["1.manifest", "2.changelog"] and k.retained_manifests == ()
    assert k.oldest_retained_ms == MIN and k.complete


def test_retention_module_matches_its_plans_answer():
    entries = plans.listing(v1(20, 16))
    r = retention.of(entries, False, 5)
    assert [f.index for f in r.deletable] == list(keep(v1(20, 16), 5).deletable)
    assert r.oldest_retained_ns == 16_500 * 1_000_000


# -- ListingGateTest's claims, on the handler --------------------------------------------

class Gate:
    """The JVM's ListingGate over PLAN_RETENTION answers (max -1): after a complete pass it
    keeps what remains plus the uploads, and lists only when a pass on that would delete or
    is not complete."""

    def __init__(self):
        self.known = None

    def listed(self, remaining, complete):
        self.known = list(remaining) if complete else None

    def uploaded(self, name, ms):
        if self.known is not None:
            self.known = [f for f in self.known if f[0] != name] + [(name, ms)]

    def must_list(self, retain, min_delete):
        if self.known is None:
            return True
        k = keep(self.known, retain, min_delete, -1)
        return bool(k.deletable) or not k.complete


def run_gate(commits, snapshot_every, retain, min_delete, max_delete) -> int:
    """Commits with a pass after each; asserts a skipped pass would delete nothing; returns the
    passes that listed."""
    gate, files, listed = Gate(), [], 0
    for v in range(1, commits + 1):
        new = [(f"{v}.changelog", 1000 * v)] + ([(f"{v}.manifest", 1000 * v + 500)] if v % snapshot_every == 0 else [])
        for f in new:
            files.append(f)
            gate.uploaded(*f)
        k = keep(files, retain, min_delete, max_delete)
        if not gate.must_list(retain, min_delete):
            assert not k.deletable, f"skipped a pass that deletes {versions(k.deletable, files)} after version {v}"
            continue
        listed += 1
        files = without(files, k.deletable)
        gate.listed(files, k.complete)
    return listed


@pytest.mark.parametrize("snapshot_every", [1, 3, 10, 1000])
def test_the_gate_skips_only_passes_that_delete_nothing(snapshot_every):
    for retain in (1, 2, 10):
        for min_delete in (0, 5):
            for max_delete in (-1, 3):
                run_gate(60, snapshot_every, retain, min_delete, max_delete)


def test_the_gate_lists_once_per_run_while_nothing_can_be_stale():
    assert run_gate(12, 2, 100, 0, -1) == 1  # Spark's default minBatchesToRetain 100: the first pass only
    assert run_gate(150, 1000, 10, 0, -1) == 1  # changelogs only: nothing is ever stale
    assert run_gate(200, 10, 10, 30, -1) <= 200 // 30 + 3  # one listing per 30 versions or so


def test_the_gate_sees_a_new_base_make_versions_stale():
    gate = Gate()
    gate.listed(v1(5, 2), True)
    assert not gate.must_list(100, 0)
    stale = keep(v1(5, 2), 2).deletable
    assert versions(stale, v1(5, 2)) == {1, 2}  # versions 1 and 2 (its changelog) below manifest 2
    gate.listed(without(v1(5, 2), stale), True)
    assert not gate.must_list(2, 0)
    gate.uploaded("6.changelog", 6000)
    assert not gate.must_list(2, 0), "manifest 2 is still the base of version 5's plan"
    gate.uploaded("6.manifest", 6500)
    gate.uploaded("7.changelog", 7000)
    assert gate.must_list(2, 0), "manifest 6 is now the base: 2 to 5 are stale"


# -- the wire, and a real worker ---------------------------------------------------------

def _plan_request(purpose, v2, version, id, first, retain, min_delete, max_delete, files) -> p.Writer:
    w = (p.request(p.PLAN, 0).u8(purpose).u8(v2).i64(version).str(id).i64(first).i32(retain).i64(min_delete)
         .i32(max_delete).u32(len(files)))
    for name, ms in files:
        w.str(name).i64(ms)
    return w


def test_the_payload_reads_into_the_answers_arguments():
    files = [("1.changelog", 5), ("é.zip", -1)]
    op, handle, fields = p.decode_request(_plan_request(p.PLAN_LOAD, True, 7, "x", 2, 3, 4, 5, files).body())
    assert (op, handle) == (p.PLAN, 0)
    assert fields == {"purpose": 1, "v2": True, "version": 7, "id": "x", "from": 2, "minVersionsToRetain": 3,
                      "minVersionsToDelete": 4, "maxVersionsToDelete": 5, "files": [["1.changelog", 5], ["é.zip", -1]]}
    for purpose in (0, 5, 255):
        with pytest.raises(p.ProtocolError, match="unknown plan purpose"):
            p.decode_request(_plan_request(purpose, False, 1, "", 0, 0, 0, 0, []).body())


def _reply_vectors():
    for line in (VECTORS / "replies.tsv").read_text().splitlines():
        name, op, _, body, _ = line.split("\t")
        if op == "PLAN" and not name.startswith("bad-"):
            yield name, bytes.fromhex(body)


def test_a_real_worker_answers_the_plan_vectors_as_replies_tsv_says():
    from service_client import ServiceProcess
    requests = {}
    for line in (VECTORS / "frames.tsv").read_text().splitlines():
        name, body, _ = line.split("\t")
        requests[name] = bytes.fromhex(body)
    expected = dict(_reply_vectors())
    assert len(expected) >= 10 and set(expected) <= set(requests)
    svc = ServiceProcess(workers=1)
    try:
        c = svc.connect(0)
        for name, reply in expected.items():
            c.sock.sendall(len(requests[name]).to_bytes(4, "little") + requests[name])
            got = c._exact(int.from_bytes(c._exact(4), "little"))
            assert got == reply, name
        c.sock.sendall(len(requests["bad-plan-purpose"]).to_bytes(4, "little") + requests["bad-plan-purpose"])
        status, r = p.decode_response(c._exact(int.from_bytes(c._exact(4), "little")))
        assert status == p.STATUS_ERROR and r.str() == "TTLSTATE_PROTOCOL_ERROR" and "plan purpose" in r.str()
        # a replay from a snapshot above the version: an error reply, the connection stays
        c2 = svc.connect(0)
        c2.send(_plan_request(p.PLAN_FROM_SNAPSHOT, False, 3, "", 4, 0, 0, 0, v1(3, 2)))
        with pytest.raises(Exception, match="cannot replay version 3"):
            c2.recv()
        assert c2.call(_plan_request(p.PLAN_RETENTION, False, 0, "", 0, 5, 0, -1, v1(20, 16))).u8() == p.PLANNED
    finally:
        svc.stop()


def test_only_whole_ascii_names_are_state_files():
    """A stray `5.changelog\\n` or a name in other digits names no state file, so it cannot
    stand in for `5.changelog` in a plan (the JVM's regular expressions matched whole ASCII
    names too)."""
    for name in ("5.changelog\n", "\u0665.changelog", "5_a_b.changelog\n", "5_a.manifest\n", " 5.manifest"):
        assert layout.parse(name) is None, repr(name)
    files = [("4.changelog", 1), ("5.changelog", 2), ("5.changelog\n", 3)]
    files = [("1.changelog", 0), ("2.changelog", 0), ("3.changelog", 0)] + files
    planned = plans.answer(p.PLAN_LOAD, False, 5, "", 0, 0, 0, 0, files)
    assert names([i for i, _ in planned.changelogs], files)[-1] == "5.changelog"
