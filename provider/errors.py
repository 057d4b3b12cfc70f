"""ttlstate's exception hierarchy. Each error carries a stable error class, sent over the
wire to the JVM, which turns it into a Spark error."""

from __future__ import annotations


class TtlstateError(Exception):
    """Base of every error ttlstate raises on purpose."""

    error_class = "TTLSTATE_INTERNAL"


class ProtocolError(TtlstateError):
    """A frame that does not follow docs/PROTOCOL.md. The connection is closed."""

    error_class = "TTLSTATE_PROTOCOL_ERROR"


class AuthError(TtlstateError):
    error_class = "TTLSTATE_AUTH"


class InvalidConfError(TtlstateError):
    """A conf value that is not allowed; the message names key, value and what is allowed."""

    error_class = "TTLSTATE_INVALID_CONF"

    def __init__(self, key: str, value: str, allowed: str):
        super().__init__(f"Invalid value '{value}' for {key}: {allowed}")
        self.key, self.value, self.allowed = key, value, allowed


class UnknownHandleError(TtlstateError):
    error_class = "TTLSTATE_UNKNOWN_HANDLE"


class VersionMismatchError(TtlstateError):
    error_class = "TTLSTATE_VERSION_MISMATCH"


class StoreBusyError(TtlstateError):
    """A request that needs the committed version while a transaction writes into the
    store's database (docs/decisions/040-direct-write-transactions.md)."""
    error_class = "TTLSTATE_STORE_BUSY"


class CorruptFileError(TtlstateError):
    """A state file (changelog, manifest, SST) that cannot be read; names the file and the
    version (when known)."""

    error_class = "TTLSTATE_CORRUPT_FILE"

    def __init__(self, path: str, version: int | None, reason: str):
        at = "" if version is None else f" (version {version})"
        super().__init__(f"State file {path}{at} is unreadable: {reason}")
        self.path, self.version, self.reason = path, version, reason


class StorageError(TtlstateError):
    """RocksDB (or the local disk under it) failed; see `ttlstate.engine.engine_errors`."""

    error_class = "TTLSTATE_STORAGE"


class CheckpointReadError(TtlstateError):
    """The location cannot be read as asked; the message names the path or value."""


class NotACheckpointError(CheckpointReadError):
    error_class = "TTLSTATE_NOT_A_CHECKPOINT"


class NoStateError(CheckpointReadError):
    error_class = "TTLSTATE_NO_STATE"


class UnknownStateError(CheckpointReadError):
    """An operator, partition, store or version the checkpoint does not hold."""

    error_class = "TTLSTATE_UNKNOWN_STATE"

    def __init__(self, kind: str, value, where: str, known, message: str | None = None):
        known = list(known)
        shown = ", ".join(map(str, known[:50])) + (", ..." if len(known) > 50 else "")
        super().__init__((message or f"unknown {kind} {value!s} in {where}") + "; "
                         + (f"it has: {shown}" if known else f"it has no {kind}"))
        self.kind, self.value, self.where = kind, value, where


class UnsupportedSparkError(TtlstateError):
    """The running pyspark's line is not one the shim supports (`ttlstate.SPARK_LINES`)."""

    error_class = "TTLSTATE_UNSUPPORTED_SPARK"


class ServerSetupError(TtlstateError):
    """A Spark server (a Spark Connect server, or any session's driver) not set up for
    ttlstate, found by `ttlstate.check_server`; the message names the flags that fix it."""


class ServerNotConfiguredError(ServerSetupError):
    """The server's state-store provider is not ttlstate's."""

    error_class = "TTLSTATE_SERVER_NOT_CONFIGURED"


class ServerJarMissingError(ServerSetupError):
    """The server cannot load ttlstate's classes: its jar is not on the server."""

    error_class = "TTLSTATE_SERVER_JAR_MISSING"


class ServerJarMismatchError(ServerSetupError):
    """The server's ttlstate jar is of another ttlstate version than the client's."""

    error_class = "TTLSTATE_SERVER_JAR_MISMATCH"


class CheckpointTooNewError(TtlstateError):
    """A state file this ttlstate cannot read because a newer one wrote it (a newer manifest or
    changelog format); names the writing and the running ttlstate and Spark
    (docs/decisions/059-checkpoint-too-new.md)."""

    error_class = "TTLSTATE_CHECKPOINT_TOO_NEW"


class RepartitionError(TtlstateError):
    """`python -m ttlstate repartition` refuses to rescale a checkpoint; the message says why
    and what to do (docs/decisions/065-repartition.md)."""


class RepartitionInvalidPartitionsError(RepartitionError):
    """The partition count asked for is not a positive integer, or is the count the query
    already runs with."""

    error_class = "TTLSTATE_REPARTITION_INVALID_PARTITIONS"


class RepartitionNotStoppedError(RepartitionError):
    """The checkpoint has no committed batch, or a batch that started and did not commit (a
    running or failed query): only a stopped query's committed state is rescaled."""

    error_class = "TTLSTATE_REPARTITION_NOT_STOPPED"


class RepartitionUnsupportedError(RepartitionError):
    """An operator, store, key type, checkpoint format or state not written by ttlstate that
    the rescale cannot place by Spark's hash partitioning; names it and why."""

    error_class = "TTLSTATE_REPARTITION_UNSUPPORTED"


class MigrateError(TtlstateError):
    """`migrate` refused; the checkpoint is as it was."""


class MigrateNotStoppedError(MigrateError):
    """The last batch did not commit (the query runs, or failed), or none did."""

    error_class = "TTLSTATE_MIGRATE_NOT_STOPPED"


class MigrateRunningError(MigrateError):
    """The query wrote to its offset or commit log while the state was migrated."""

    error_class = "TTLSTATE_MIGRATE_RUNNING"


class MigrateUnsupportedError(MigrateError):
    """An operator, a state format or a checkpoint the migration cannot carry."""

    error_class = "TTLSTATE_MIGRATE_UNSUPPORTED"


class MigrateUnknownProviderError(MigrateError):
    """The checkpoint's state store provider is none of those the migration reads."""

    error_class = "TTLSTATE_MIGRATE_UNKNOWN_PROVIDER"


class MigrateSameProviderError(MigrateError):
    """The query already runs on the target provider."""

    error_class = "TTLSTATE_MIGRATE_SAME_PROVIDER"


class MigrateNotWritableError(MigrateError):
    """The checkpoint location cannot be written."""

    error_class = "TTLSTATE_MIGRATE_NOT_WRITABLE"
