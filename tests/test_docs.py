"""The README tells the truth about configuration and commands (checked, sqlite-utils style)."""

import pathlib
import re

from ttlstate import conf, values
from ttlstate.ttl import config as ttl_config

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


DECLARED = {e.key: e.default for e in conf.REGISTRY}


def test_every_key_is_declared_once_with_a_scope_and_a_doc():
    keys = [e.key for e in conf.REGISTRY]
    assert len(keys) == len(set(keys))
    assert {e.key for e in conf.ENTRIES} | {s.key for s in ttl_config.SETTINGS} == set(keys)
    for e in conf.REGISTRY:
        assert e.scope in values.SCOPES and len(e.doc) > 20, e.name
        assert (e.field is not None) == (e.scope == "ttl"), e.name


def test_every_documented_ttlstate_key_exists_and_every_key_is_documented():
    documented = set(re.findall(r"spark\.sql\.streaming\.stateStore\.ttlstate\.[A-Za-z0-9_.-]*[A-Za-z0-9]", README))
    plain = {k for k in documented if k in DECLARED}
    for key in documented - plain:  # per-operator / per-store overrides of a TTL setting
        operator, _, name = ttl_config.split_key(key[len(conf.PREFIX):])
        assert operator is not None and name in ttl_config.BY_NAME, key
    assert plain == set(DECLARED)
    conf.resolve(dict.fromkeys(documented - plain, "1s"), "store")  # the provider accepts them


def test_documented_defaults_match_the_declarations():
    for key, default in DECLARED.items():
        row = next(line for line in README.splitlines() if line.startswith(f"| `{key}`"))
        if default is not None:
            assert f"`{default}`" in row, row


def test_readme_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    for target in set(re.findall(r"^make ([a-z-]+)", README, re.M)) | set(re.findall(r"`make ([a-z-]+)`", README)):
        assert re.search(rf"^{target}:", makefile, re.M), target


def test_readme_metrics_are_declared_by_the_shim():
    src = "\n".join(p.read_text() for p in (ROOT / "jvm-shim").rglob("*.java"))
    for name in re.findall(r"`(ttlstate[A-Z][A-Za-z]+)`", README):
        assert f'"{name}"' in src, name


def test_protocol_lists_every_error_class():
    from ttlstate import errors

    protocol = (ROOT / "docs" / "PROTOCOL.md").read_text()
    section = protocol.split("### Error classes", 1)[1].split("\n## ", 1)[0]
    classes = {c.error_class for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.TtlstateError)}
    assert classes and classes <= set(re.findall(r"TTLSTATE_[A-Z_]+", section))
