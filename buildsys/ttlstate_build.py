"""The build backend of the ttlstate package: setuptools' own, plus the JVM shim jar.

`pip install .`, `pip wheel .` and `python -m build` use it (pyproject.toml's
`build-backend`). It is `setuptools.build_meta` with two additions:

- `BuildPy` (setuptools' `build_py`, named in `[tool.setuptools.cmdclass]`) compiles the shim
  with `scalac` (the one inside the pyspark wheel) and `javac` straight into the wheel's
  `ttlstate/jars/ttlstate-shim.jar`; no gradle, no network.
- The wheel build asks for `pyspark` (the line the shim compiles against, `SPARK_BUILD_REQ`)
  as a build requirement, since an isolated build environment does not see the user's
  pyspark. Set `TTLSTATE_SPARK_JARS` to a directory of Spark's jars (e.g. `$SPARK_HOME/jars`)
  to compile against those instead and skip that download; `pip install --no-build-isolation`
  uses the pyspark of the environment.

Without a JDK the wheel still builds if the tree holds a shim jar already (an sdist made by
this backend ships one, so does a tree where `make jar` ran); otherwise it stops with a message
naming the JDK to install. Editable installs (`make setup`'s `pip install -e .`) build no jar:
the developer path builds it with gradle (`make jar`).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

from setuptools import build_meta as _orig
from setuptools.command.build_py import build_py as _build_py
from setuptools.command.sdist import sdist as _sdist

# The Spark line whose jars the shim compiles against (the newest supported; the shim adapts
# to the earlier lines at run time, docs/decisions/055-one-package-for-spark-4-0-to-4-3.md).
SPARK_BUILD_REQ = "pyspark>=4.3.0,<4.4"
JAR_NAME = "ttlstate-shim.jar"
ROOT = pathlib.Path(__file__).resolve().parent.parent
# The shim's Java sources: the common tree, and an overlay of the classes that name one Spark
# generation's types (docs/decisions/108-spark-35-plan.md, section 2): spark4 for the packaged jar;
# spark35 for Spark 3.5, built by hand so far (`python buildsys/ttlstate_build.py --overlay spark35`).
COMMON_JAVA = ROOT / "jvm-shim" / "src" / "main" / "java"
OVERLAYS = ("spark4", "spark35")
SCALA_SRC = ROOT / "jvm-shim" / "src" / "main" / "scala"
# Files the jar carries as they are: META-INF/services names the session extensions, which
# Spark then installs by itself (docs/decisions/101-session-extensions-install-themselves.md).
RESOURCES = ROOT / "jvm-shim" / "src" / "main" / "resources"
TREE_JAR = ROOT / "provider" / "jars" / JAR_NAME
JDK_HINT = ("a JDK 17 or newer (javac and java on PATH or in $JAVA_HOME/bin; on Debian/Ubuntu: "
            "apt-get install openjdk-17-jdk-headless)")


class BuildError(RuntimeError):
    pass


def package_version(root: pathlib.Path = ROOT) -> str:
    """The package's version, from pyproject.toml (stamped into the jar's manifest, where
    `io.ttlstate.spark.ShimInfo` reads it; gradle stamps the same)."""
    import re
    m = re.search(r'(?m)^version\s*=\s*"([^"]+)"', (root / "pyproject.toml").read_text())
    if not m:
        raise BuildError(f"no version in {root / 'pyproject.toml'}")
    return m.group(1)


def jar_manifest(version: str) -> str:
    """The jar's META-INF/MANIFEST.MF."""
    return (f"Manifest-Version: 1.0\r\nImplementation-Title: ttlstate-shim\r\n"
            f"Implementation-Version: {version}\r\n\r\n")


# ---- PEP 517 hooks ------------------------------------------------------------------------

def _from_sdist() -> bool:
    """True when building from an sdist of this backend, which holds the jar built with it."""
    return (ROOT / "PKG-INFO").is_file() and TREE_JAR.is_file()


def _spark_req() -> list[str]:
    if os.environ.get("TTLSTATE_SPARK_JARS") or _from_sdist():
        return []
    return [SPARK_BUILD_REQ]


def get_requires_for_build_wheel(config_settings=None):
    return _orig.get_requires_for_build_wheel(config_settings) + _spark_req()


def get_requires_for_build_sdist(config_settings=None):
    # The sdist carries a jar when one can be built (see Sdist), so it needs Spark's jars too.
    return _orig.get_requires_for_build_sdist(config_settings) + _spark_req()


get_requires_for_build_editable = _orig.get_requires_for_build_editable
prepare_metadata_for_build_wheel = _orig.prepare_metadata_for_build_wheel
prepare_metadata_for_build_editable = _orig.prepare_metadata_for_build_editable
build_wheel = _orig.build_wheel
build_sdist = _orig.build_sdist
build_editable = _orig.build_editable


# ---- the jar ------------------------------------------------------------------------------

def _tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        p = pathlib.Path(home) / "bin" / name
        if p.is_file():
            return str(p)
    return shutil.which(name)


def spark_jars_dir() -> pathlib.Path:
    """The directory of Spark's jars to compile against."""
    given = os.environ.get("TTLSTATE_SPARK_JARS")
    if given:
        d = pathlib.Path(given)
        if not d.is_dir():
            raise BuildError(f"TTLSTATE_SPARK_JARS={given} is not a directory")
        return d
    try:
        import pyspark
    except ImportError:
        raise BuildError(
            "Building the ttlstate shim jar needs Spark's jars: install pyspark into the build "
            f"environment ({SPARK_BUILD_REQ}) or set TTLSTATE_SPARK_JARS to a directory of "
            "Spark's jars (e.g. $SPARK_HOME/jars)") from None
    d = pathlib.Path(pyspark.__file__).resolve().parent / "jars"
    if not d.is_dir():
        raise BuildError(f"pyspark at {pyspark.__file__} has no jars directory")
    return d


def _run(cmd: list[str], what: str) -> None:
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise BuildError(f"{what} failed (exit {p.returncode}):\n{p.stdout}")


def build_jar(out: pathlib.Path, jars_dir: pathlib.Path | None = None, overlay: str = "spark4") -> pathlib.Path:
    """Compiles the shim (Scala first, then Java: the common tree and `overlay`'s) against
    Spark's jars into the jar `out`, with the resources (`RESOURCES`)."""
    if overlay not in OVERLAYS:
        raise BuildError(f"overlay {overlay!r}: expected one of {', '.join(OVERLAYS)}")
    java_srcs = (COMMON_JAVA, ROOT / "jvm-shim" / "src" / overlay / "java")
    javac, java = _tool("javac"), _tool("java")
    if not javac or not java:
        raise BuildError(f"Building the ttlstate shim jar needs {JDK_HINT}; none was found.")
    jars_dir = jars_dir or spark_jars_dir()
    spark_cp = sorted(str(p) for p in jars_dir.glob("*.jar"))
    scala_tools = [p for p in spark_cp if pathlib.Path(p).name.startswith(
        ("scala-compiler-", "scala-library-", "scala-reflect-"))]
    if len(scala_tools) < 3:
        raise BuildError(f"{jars_dir} lacks the Scala compiler jars (scala-compiler, -library, -reflect)")
    java_files = sorted(str(p) for src in java_srcs for p in src.rglob("*.java"))
    scala_files = sorted(str(p) for p in SCALA_SRC.rglob("*.scala"))
    if not java_files:
        raise BuildError(f"No Java sources under {COMMON_JAVA}")
    with tempfile.TemporaryDirectory(prefix="ttlstate-jar-") as tmp:
        classes = pathlib.Path(tmp) / "classes"
        classes.mkdir()
        argfile = pathlib.Path(tmp) / "args"
        if scala_files:
            argfile.write_text("\n".join(
                ["-deprecation", "-d", str(classes), "-classpath", os.pathsep.join(spark_cp)]
                + scala_files))
            _run([java, "-cp", os.pathsep.join(scala_tools), "scala.tools.nsc.Main", f"@{argfile}"],
                 "scalac (jvm-shim/src/main/scala)")
        argfile.write_text("\n".join(
            ["--release", "17", "-encoding", "UTF-8", "-nowarn", "-d", str(classes),
             "-cp", os.pathsep.join(spark_cp + [str(classes)])] + java_files))
        _run([javac, f"@{argfile}"], f"javac (jvm-shim/src/main/java, jvm-shim/src/{overlay}/java)")
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(out.name + ".part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", jar_manifest(package_version()))
            for base in (classes, RESOURCES):
                for f in sorted(base.rglob("*")):
                    if f.is_file():
                        z.write(f, f.relative_to(base).as_posix())
        os.replace(part, out)  # a JVM reading the old jar keeps its file
    return out


def provide_jar(target: pathlib.Path) -> None:
    """Puts the shim jar at `target`: an sdist's own (built from the same sources by `Sdist`),
    else a freshly compiled one, else (no JDK) the prebuilt one of the tree."""
    from_sdist = _from_sdist()
    if from_sdist or (_tool("javac") is None and TREE_JAR.is_file()):
        why = "the sdist's" if from_sdist else "no JDK found; packaging the prebuilt"
        print(f"ttlstate: {why} {TREE_JAR.relative_to(ROOT)}", file=sys.stderr)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.resolve() != TREE_JAR.resolve():
            shutil.copyfile(TREE_JAR, target)
        return
    if _tool("javac") is None:
        raise BuildError(f"Building the ttlstate shim jar needs {JDK_HINT}; none was found, and "
                         f"the source tree holds no prebuilt {TREE_JAR.relative_to(ROOT)}.")
    print(f"ttlstate: compiling the JVM shim into {target}", file=sys.stderr)
    build_jar(target)


class BuildPy(_build_py):
    """setuptools' build_py, then the shim jar into the built package (not for editable installs)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # the package is the source tree: `make jar` (gradle) builds its jar
        provide_jar(pathlib.Path(self.build_lib) / "ttlstate" / "jars" / JAR_NAME)


class Sdist(_sdist):
    """setuptools' sdist with the shim jar inside, built when a JDK is present, so that a
    wheel can be built from the sdist on a machine without one."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        target = pathlib.Path(base_dir) / "provider" / "jars" / JAR_NAME
        if _tool("javac") is not None:
            target.unlink(missing_ok=True)  # a hard link to the tree's jar: never write through it
            print(f"ttlstate: compiling the JVM shim into the sdist ({target})", file=sys.stderr)
            build_jar(target)
        elif not target.is_file():
            print(f"ttlstate: no JDK found; the sdist holds no shim jar (a wheel built from it will "
                  f"need {JDK_HINT})", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """`python buildsys/ttlstate_build.py --overlay spark35 --jars DIR --out JAR`: a shim jar
    for one Spark generation against the jars of `DIR` (a pyspark's `jars/` or an sdist's
    `deps/jars`), by hand; the packaged jar is spark4's."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    ap.add_argument("--overlay", choices=OVERLAYS, default="spark4")
    ap.add_argument("--jars", type=pathlib.Path, help="Spark's jars (default: the installed pyspark's)")
    ap.add_argument("--out", type=pathlib.Path, required=True)
    a = ap.parse_args(argv)
    print(build_jar(a.out, a.jars, a.overlay))
    return 0


if __name__ == "__main__":
    sys.exit(main())
