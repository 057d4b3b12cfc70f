"""Is this Spark server set up for ttlstate? Asked from the client, which through Spark Connect
sees neither the server's JVM nor its confs' effect until a query fails
(docs/decisions/058-spark-connect-server-check.md).

`check_server(spark)` runs two cheap statements on the server: it reads the provider conf
(`spark.sql.streaming.stateStore.providerClass`) and calls the jar's `ShimInfo.describe()`
through SQL's `reflect` (which resolves a class the server cannot load as an analysis error).
It raises a `ServerSetupError` naming the `--jars`/`--conf` flags that fix the server; else it
returns what the server runs. It works on a classic session too (the server is then the
driver of this process).
"""

from __future__ import annotations

import dataclasses

from . import PROVIDER_CLASS, PROVIDER_CLASS_KEY, __version__, check_spark_version
from .errors import ServerJarMismatchError, ServerJarMissingError, ServerNotConfiguredError

INFO_CLASS = "io.ttlstate.spark.ShimInfo"
JAR_FLAG = "--jars \"$(python -c 'import ttlstate; print(ttlstate.jar_path())')\""
PROVIDER_FLAG = f"--conf {PROVIDER_CLASS_KEY}={PROVIDER_CLASS}"
WHERE = "(README, \"Spark Connect\")"


@dataclasses.dataclass(frozen=True)
class ServerInfo:
    ttlstate: str  # the version of the server's jar
    spark: str  # the server's Spark version
    jar: str  # where the server loaded the jar from


def server_flags() -> str:
    """The spark-submit flags a server needs for ttlstate, as the errors name them."""
    return f"{JAR_FLAG} {PROVIDER_FLAG}"


def parse_describe(line: str) -> ServerInfo:
    """`ShimInfo.describe()`'s `ttlstate=<v> spark=<v> jar=<location>`."""
    fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
    return ServerInfo(fields.get("ttlstate", "unknown"), fields.get("spark", "unknown"),
                      fields.get("jar", "unknown"))


def _class_missing(error: Exception, cls: str) -> bool:
    # Spark's reflect: "class <name> not found" (DATATYPE_MISMATCH.UNEXPECTED_CLASS_TYPE)
    return f"class {cls} not found" in str(error)


def _reflect(spark, cls: str, method: str) -> str:
    return spark.sql(f"SELECT reflect('{cls}', '{method}') AS r").collect()[0][0]


def check_server(spark) -> ServerInfo:
    """What the session's server runs, if it serves ttlstate with this client's version;
    else a `ServerSetupError` (`TTLSTATE_SERVER_NOT_CONFIGURED`, `..._JAR_MISSING`,
    `..._JAR_MISMATCH`) naming the flags to start the server with."""
    provider = spark.conf.get(PROVIDER_CLASS_KEY, None)
    try:
        info = parse_describe(_reflect(spark, INFO_CLASS, "describe"))
    except Exception as e:  # noqa: BLE001 - pyspark's classic and Connect errors differ
        if not _class_missing(e, INFO_CLASS):
            raise
        info = None
    if info is None:
        try:
            _reflect(spark, PROVIDER_CLASS, "describe")
            has_provider = True  # unreachable: the provider has no static describe
        except Exception as e:  # noqa: BLE001
            has_provider = not _class_missing(e, PROVIDER_CLASS)
        if has_provider:  # a ttlstate jar older than ShimInfo
            raise ServerJarMismatchError(
                f"The Spark server's ttlstate jar predates ttlstate {__version__} (it has "
                f"{PROVIDER_CLASS} but no {INFO_CLASS}); this client runs ttlstate {__version__}. "
                f"Restart the server with the jar of ttlstate {__version__}: {JAR_FLAG}, run with "
                f"the server's Python once ttlstate {__version__} is installed there {WHERE}.")
        raise ServerJarMissingError(
            f"The Spark server cannot load ttlstate's classes ({INFO_CLASS} not found): its jar "
            f"is not on the server. Start the server with {server_flags()} (the jar of "
            f"ttlstate {__version__}, run with the server's Python) {WHERE}.")
    if info.ttlstate != __version__:
        raise ServerJarMismatchError(
            f"The Spark server's ttlstate jar is version {info.ttlstate} ({info.jar}); this "
            f"client runs ttlstate {__version__}. Restart the server with the jar of ttlstate "
            f"{__version__}: {JAR_FLAG}, run with the server's Python once ttlstate "
            f"{__version__} is installed there {WHERE}.")
    check_spark_version(info.spark)
    if provider != PROVIDER_CLASS:
        raise ServerNotConfiguredError(
            f"The Spark server's {PROVIDER_CLASS_KEY} is {provider or 'not set'} (Spark's "
            f"default provider then keeps the state, and ttlstate's confs have no effect). "
            f"Start the server with {PROVIDER_FLAG}, or set it on this session "
            f"(spark.conf.set(\"{PROVIDER_CLASS_KEY}\", \"{PROVIDER_CLASS}\")) {WHERE}.")
    return info
