"""The checkpoint layout's shared vectors (`tests/vectors/layout_names.tsv`,
`layout_plans.tsv`, `layout_replays.tsv`) read by `ttlstate.layout`, the layout's one owner:
the JVM asks a worker for its plans (`PLAN`; tests/test_plans.py reads the plan vectors
through the handler) and for the names of the files it uploads (`COMMIT`, `SNAPSHOT`)
(docs/decisions/052-checkpoint-layout-vectors.md, docs/decisions/110-worker-plans-checkpoint-files.md)."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from ttlstate import layout

VECTORS = pathlib.Path(__file__).parent / "vectors"
NAMES = VECTORS / "layout_names.tsv"
PLANS = VECTORS / "layout_plans.tsv"
REPLAYS = VECTORS / "layout_replays.tsv"


def _rows(path: pathlib.Path):
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            yield line.split("\t")


def _opt(text: str) -> str | None:
    return None if text == "-" else text


@dataclasses.dataclass(frozen=True)
class _Listed:
    name: str
    mtime_ns: int
    version: int
    kind: str
    id: str | None
    base_id: str | None


def _listing(text: str) -> list[_Listed]:
    out = []
    for item in ([] if text == "-" else text.split(" ")):
        name, _, mtime = item.partition("@")
        f = layout.parse(name)
        out.append(_Listed(name, int(mtime), f.version, f.kind, f.id, f.base_id))
    return out


def _python_plan(fmt: str, listing: str, version: str, id: str) -> str:
    try:
        p = layout.plan(_listing(listing), int(version), _opt(id), v2=fmt == "v2")
    except layout.MissingFile as e:
        return f"MISSING {e.pattern}"
    return (p.manifest.name if p.manifest else "-") + "|" + ",".join(c.name for c in p.changelogs)


def test_the_vectors_cover_both_formats_and_every_outcome():
    plans = list(_rows(PLANS))
    assert {fmt for _, fmt, *_ in plans} == {"v1", "v2"}
    assert any(e.startswith("MISSING") for *_, e in plans) and any(e.startswith("-|") for *_, e in plans)
    assert any(not e.startswith(("-", "MISSING")) for *_, e in plans)  # from a manifest
    names = list(_rows(NAMES))
    assert any(v == "-" for _, v, *_ in names) and any(i != "-" for _, _, _, i, _ in names)


@pytest.mark.parametrize("row", list(_rows(NAMES)), ids=lambda r: r[0])
def test_python_names_files_as_the_vectors_say(row):
    name, version, kind, id, base_id = row
    parsed = layout.parse(name)
    if version == "-":
        assert parsed is None
        return
    assert parsed == layout.FileName(int(version), kind, _opt(id), _opt(base_id))
    assert layout.name(int(version), kind, _opt(id), _opt(base_id)) == name


@pytest.mark.parametrize("row", list(_rows(PLANS)), ids=lambda r: r[0])
def test_python_plans_loads_as_the_vectors_say(row):
    case, fmt, listing, version, id, expected = row
    assert _python_plan(fmt, listing, version, id) == expected, case


def _python_replay(fmt: str, listing: str, kind: str, first: str, version: str, id: str) -> str:
    files, v2 = _listing(listing), fmt == "v2"
    try:
        if kind == "snapshot":
            p = layout.plan_from_snapshot(files, int(first), int(version), _opt(id), v2=v2)
            manifest, logs = p.manifest, p.changelogs
        else:
            manifest, (logs, _, _) = None, layout.changelogs(files, int(first), int(version), _opt(id), v2=v2)
    except layout.MissingFile as e:
        return f"MISSING {e.pattern}"
    return (manifest.name if manifest else "-") + "|" + ",".join(c.name for c in logs)


def test_the_replay_vectors_cover_both_kinds_and_outcomes():
    rows = list(_rows(REPLAYS))
    assert {r[1] for r in rows} == {"v1", "v2"} and {r[3] for r in rows} == {"snapshot", "changes"}
    assert any(r[-1].startswith("MISSING") for r in rows) and any(r[-1].startswith("-|") for r in rows)


@pytest.mark.parametrize("row", list(_rows(REPLAYS)), ids=lambda r: r[0])
def test_python_plans_replays_and_change_ranges_as_the_vectors_say(row):
    case, fmt, listing, kind, first, version, id, expected = row
    assert _python_replay(fmt, listing, kind, first, version, id) == expected, case
