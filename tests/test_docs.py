"""The documents tell the truth about configuration, metrics, error classes, commands and the
design's decisions (checked, sqlite-utils style), and the docs site builds."""

import functools
import os
import pathlib
import re
import subprocess
import sys

from ttlstate import conf, errors, values
from ttlstate.ttl import config as ttl_config

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
DECISIONS = DOCS / "decisions"
# The user documents: the README and the docs site, without the decision log (history).
USER_DOCS = {p: p.read_text() for p in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
             if DECISIONS not in p.parents}
ALL_DOCS = "\n".join(USER_DOCS.values())

DECLARED = {e.key: e.default for e in conf.REGISTRY}


@functools.lru_cache(maxsize=None)
def _all_repo_files() -> tuple:
    """(path relative to the root, path) of the checkout's files, not walking into the
    directories of builds and virtual environments (the matrix's venvs hold pyspark)."""
    skip = {".git", "build", "site", ".venvs", ".venv", "node_modules", "__pycache__", ".gradle",
            ".pytest_cache", ".benchmarks", "spark-warehouse", "metastore_db"}
    out = []
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(n for n in dirs if n not in skip and not n.endswith(".egg-info"))
        for n in sorted(names):
            p = pathlib.Path(d, n)
            out.append((p.relative_to(ROOT), p))
    return tuple(out)


def _repo_files(*suffixes):
    for rel, p in _all_repo_files():
        if p.suffix in suffixes or p.name in suffixes:
            yield rel, p


def test_every_key_is_declared_once_with_a_scope_and_a_doc():
    keys = [e.key for e in conf.REGISTRY]
    assert len(keys) == len(set(keys))
    assert {e.key for e in conf.ENTRIES} | {s.key for s in ttl_config.SETTINGS} == set(keys)
    for e in conf.REGISTRY:
        assert e.scope in values.SCOPES and len(e.doc) > 20, e.name
        assert (e.field is not None) == (e.scope == "ttl"), e.name


def test_every_documented_ttlstate_key_exists_and_every_key_is_documented():
    documented = set(re.findall(r"spark\.sql\.streaming\.stateStore\.ttlstate\.[A-Za-z0-9_.-]*[A-Za-z0-9]", ALL_DOCS))
    plain = {k for k in documented if k in DECLARED}
    for key in documented - plain:  # per-operator / per-store overrides of a TTL setting
        operator, _, name = ttl_config.split_key(key[len(conf.PREFIX):])
        assert operator is not None and name in ttl_config.BY_NAME, key
    assert plain == set(DECLARED)
    conf.resolve(dict.fromkeys(documented - plain, "1s"), "store")  # the provider accepts them
    reference = (DOCS / "reference" / "configuration.md").read_text()
    assert all(f"`{key}`" in reference for key in DECLARED)


def test_documented_defaults_match_the_declarations():
    """Every table row of a key, in any document (the README's summary, the TTL guide, the
    generated reference), shows the declared default."""
    rows = 0
    for text in USER_DOCS.values():
        for line in text.splitlines():
            m = re.match(r"\| `(spark\.sql\.streaming\.stateStore\.ttlstate\.[^`]+)` \|([^|]*)\|", line)
            if m and m.group(1) in DECLARED:
                rows += 1
                default = DECLARED[m.group(1)]
                if default is not None:
                    assert f"`{default}`" in m.group(2), line
    assert rows >= len(DECLARED)  # the reference has a row for every key


def test_generated_pages_match_the_code():
    """docs/reference/configuration.md and metrics.md are what buildsys/gen_docs.py writes from
    the settings registry and the shim's metric declarations (a "cog" check)."""
    run = subprocess.run([sys.executable, str(ROOT / "buildsys" / "gen_docs.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_docs_site_builds_strictly(tmp_path):
    """mkdocs is in the test extra: a missing mkdocs fails here, it does not skip."""
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").exists()


def test_readme_and_design_stay_short():
    assert len(README.splitlines()) <= 400
    assert len((DOCS / "DESIGN.md").read_text().splitlines()) <= 800


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README):
        if not re.match(r"[a-z]+:", target):
            assert (ROOT / target).exists(), target


def test_documented_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    named = set(re.findall(r"^make ([a-z-]+)", ALL_DOCS, re.M)) | set(re.findall(r"`make ([a-z-]+)", ALL_DOCS))
    assert {"demo", "test", "test-matrix"} <= set(re.findall(r"^make ([a-z-]+)", README, re.M))
    for target in named:
        assert re.search(rf"^{target}:", makefile, re.M), target


def _declared_metrics():
    sys.path.insert(0, str(ROOT / "buildsys"))
    try:
        import gen_docs
    finally:
        sys.path.pop(0)
    return gen_docs, {name for name, _, _ in gen_docs.declared_metrics()}


def test_documented_metrics_are_declared_by_the_shim():
    gen_docs, declared = _declared_metrics()
    src = "\n".join(p.read_text() for p in (ROOT / "jvm-shim").rglob("*.java"))
    # the generator reads every metric StoreMetrics.java names
    assert declared == set(re.findall(r'"(ttlstate[A-Z]\w+)"', gen_docs.STORE_METRICS.read_text()))
    for name in re.findall(r"`(ttlstate[A-Z][A-Za-z0-9]+)`", ALL_DOCS):
        assert f'"{name}"' in src, name


@functools.lru_cache(maxsize=None)
def _code_error_classes():
    python = set()
    for _, p in _repo_files(".py"):
        if p.parts[len(ROOT.parts)] in ("provider", "ttl"):
            python |= set(re.findall(r'error_class = "(TTLSTATE_[A-Z_]+)"', p.read_text()))
    java = (ROOT / "jvm-shim/src/main/java/io/ttlstate/spark/ErrorClasses.java").read_text()
    return python | set(re.findall(r'= "(TTLSTATE_[A-Z_]+)"', java))


@functools.lru_cache(maxsize=None)
def _code_environment_variables():
    """The TTLSTATE_* environment variables the code, the tests or the build read."""
    names = set()
    for _, p in _repo_files(".py"):
        names |= set(re.findall(r'(?:environ\.get\(|environ\[|getenv\(|repetitions\()"(TTLSTATE_[A-Z_]+)"', p.read_text()))
    return names | set(re.findall(r"\b(TTLSTATE_[A-Z_]+)\b", (ROOT / "Makefile").read_text()))


def test_troubleshooting_names_exactly_the_error_classes_of_the_code():
    page = (DOCS / "reference" / "errors.md").read_text()
    assert set(re.findall(r"^### (TTLSTATE_[A-Z_]+)$", page, re.M)) == _code_error_classes()
    for name in set(re.findall(r"TTLSTATE_[A-Z_]+[A-Z]", ALL_DOCS)) - {"TTLSTATE_LOG_LEVEL"}:
        assert name in _code_error_classes() or name in _code_environment_variables(), name


def test_protocol_lists_every_error_class():
    protocol = (DOCS / "PROTOCOL.md").read_text()
    section = protocol.split("### Error classes", 1)[1].split("\n## ", 1)[0]
    classes = {c.error_class for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.TtlstateError)}
    assert classes and classes <= set(re.findall(r"TTLSTATE_[A-Z_]+", section))


DECISION_FILE = re.compile(r"^(\d{3})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$")


def test_the_decision_log_is_one_file_per_decision():
    files = sorted(p.name for p in DECISIONS.glob("*.md") if p.name != "index.md")
    assert all(DECISION_FILE.match(f) for f in files), files
    numbers = [int(f[:3]) for f in files]
    assert numbers == list(range(1, len(numbers) + 1))
    index = (DECISIONS / "index.md").read_text()
    for f in files:
        text = (DECISIONS / f).read_text()
        assert text.startswith(f"# {f[:3]}. "), f
        assert f"]({f})" in index, f
        superseded = re.search(r"^\*\*Superseded by \[(\d{3})\]\((\d{3}-[^)]+\.md)\)", text, re.M)
        if superseded:
            assert (DECISIONS / superseded.group(2)).exists(), f


# Files others are changing while this check was written; they still cite by number and are
# converted when their change lands. Nothing else may.
def test_every_cited_decision_exists_and_no_bare_design_number_remains():
    cited = 0
    suffixes = (".py", ".java", ".scala", ".md", ".gradle", ".toml", ".tsv", ".yml", "Makefile")
    for rel, p in _repo_files(*suffixes):
        text = p.read_text(errors="replace")
        for name in re.findall(r"decisions/(\d{3}-[a-z0-9-]+\.md)", text):
            cited += 1
            assert (DECISIONS / name).exists(), f"{rel} cites docs/decisions/{name}"
        bare = re.findall(r"DESIGN(?:\.md)?,?\s+(?:entry |decision )?\d", text)
        assert not bare, f"{rel} cites the design by number: {bare}; cite docs/decisions/NNN-title.md"
        assert "shared/" not in text or str(rel) == "tests/test_docs.py", f"{rel} cites shared/, outside the repo"
    assert cited > 100


def _prose(text):
    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_user_documents_carry_no_run_diary():
    """No commit hashes, no dates of runs and no session diary in the README and the docs site
    (the decision log and benchmarks/results/history.md keep the history). docs/TESTING.md is
    left to its own change."""
    for path, text in USER_DOCS.items():
        if path.name == "TESTING.md":
            continue
        prose = _prose(text)
        assert not re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,10}\b", prose), path
        assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", prose), path
        for phrase in ("session ended", "stopped there", "as the session ended", "this session"):
            assert phrase not in prose, (path, phrase)
