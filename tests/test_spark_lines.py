"""The one shim jar against each Spark line's jars, statically (no JVM; issue 19,
docs/decisions/055-one-package-for-spark-4-0-to-4-3.md).

`buildsys/linkcheck.py` lists every class, method or field the shim names that a Spark's jars
lack, and every abstract method of Spark's traits it does not implement. The jar is compiled
against Spark 4.3; on each earlier line the only references allowed to be missing are the ones
the version adapters (`io.ttlstate.spark.compat`) and the guarded calls reach only on lines that
have them. Always checked against the installed pyspark; other lines' jars are checked when
`TTLSTATE_SPARK_JARS_DIRS` names their directories (os.pathsep-separated, each a pyspark
`jars/` directory). `make test-matrix` runs it (marker `matrix`) in each line's venv, on that
line's installed pyspark.
"""

from __future__ import annotations

import os
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "buildsys"))
import linkcheck  # noqa: E402

from conftest import shim_jar  # noqa: E402

S = "org/apache/spark/sql/execution/streaming/state/"
SINCE_41 = {  # in LineApi, reached only when SparkCompat.atLeast(4, 1)
    f"io/ttlstate/spark/compat/LineApi$Since41: missing method {S}StateStoreErrors.stateStoreCheckpointIdsNotSupported(Ljava/lang/String;)L{S}StateStoreCheckpointIdsNotSupported;",
    f"io/ttlstate/spark/compat/LineApi: missing method {S}StateStore.reportCommitToCoordinator(JL{S}StateStoreId;Lorg/apache/hadoop/conf/Configuration;)V",
    f"io/ttlstate/spark/compat/LineApi: missing method {S}StateStoreConf.commitValidationEnabled()Z",
    f"io/ttlstate/spark/compat/LineApi: missing method {S}StateStoreConf.reportSnapshotUploadLag()Z",
    f"io/ttlstate/spark/compat/LineApi: missing method {S}StateStoreConf.maxVersionsToDeletePerMaintenance()I",
    f"io/ttlstate/spark/compat/LineApi: missing method {S}StateStoreCoordinatorRef.snapshotUploaded(L{S}StateStoreProviderId;JJ)Z",
    f"io/ttlstate/spark/compat/LineApi: missing method {S}StateStoreProvider$.coordinatorRef()Lscala/Option;",
    f"io/ttlstate/spark/compat/LineApi: missing method {S}StateStoreProvider$.getRunId(Lorg/apache/hadoop/conf/Configuration;)Ljava/lang/String;",
}
# What each line may lack (lines before 4.3 only; 4.3 lacks nothing).
ALLOWED = {"4.0": SINCE_41, "4.1": set(), "4.2": set(), "4.3": set()}


def _line(jars_dir: pathlib.Path) -> str:
    names = [p.name for p in jars_dir.glob("spark-core_*.jar")]
    m = re.match(r"spark-core_[0-9.]+-(\d+)\.(\d+)\.", names[0]) if names else None
    if not m:
        pytest.fail(f"{jars_dir} holds no spark-core jar")
    return f"{m.group(1)}.{m.group(2)}"


def _dirs() -> list[pathlib.Path]:
    import pyspark
    dirs = [pathlib.Path(pyspark.__file__).resolve().parent / "jars"]
    dirs += [pathlib.Path(d) for d in os.environ.get("TTLSTATE_SPARK_JARS_DIRS", "").split(os.pathsep) if d]
    return dirs


@pytest.mark.matrix
@pytest.mark.parametrize("jars_dir", _dirs(), ids=str)
def test_the_shim_links_against_the_line(jars_dir):
    line = _line(jars_dir)
    assert line in ALLOWED, f"Spark {line} is not a supported line"
    problems = set(linkcheck.check(shim_jar(), str(jars_dir)))
    assert problems <= ALLOWED[line], sorted(problems - ALLOWED[line])
