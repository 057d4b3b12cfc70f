"""Drive Spark's StateStoreProvider API from Python through py4j (provider-level tests).

Keys are (key1 STRING, key2 INT) and values (value INT), the schemas of Spark's own
StateStoreSuite.
"""

from __future__ import annotations

import os

import uuid

TTLSTATE = "io.ttlstate.spark.TtlStateStoreProvider"
CONF = "spark.sql.streaming.stateStore."
CACHE_DIR_KEY = CONF + "ttlstate.checkpoint.localCacheDir"
MODE_KEY = CONF + "ttlstate.checkpoint.mode"
FORMAT_KEY = CONF + "checkpointFormatVersion"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
KEY_DDL = "key1 STRING, key2 INT"
VALUE_DDL = "value INT"


class JvmState:
    """`cache_dir`: the ttlstate local checkpoint cache every `store_conf` uses (None: the
    test run's, `TTLSTATE_TEST_CACHE_DIR`, else the default under java.io.tmpdir)."""

    def __init__(self, spark, cache_dir: str | None = None):
        self.spark = spark
        self.cache_dir = cache_dir or os.environ.get("TTLSTATE_TEST_CACHE_DIR")
        self.jvm = spark._jvm
        self.gw = spark.sparkContext._gateway
        j = self.jvm
        self.pkg = j.org.apache.spark.sql.execution.streaming.state
        self.key_schema = j.org.apache.spark.sql.types.StructType.fromDDL(KEY_DDL)
        self.value_schema = j.org.apache.spark.sql.types.StructType.fromDDL(VALUE_DDL)
        self.key_proj = self._projection(self.key_schema)
        self.value_proj = self._projection(self.value_schema)
        self.prefix_proj = self._projection(j.org.apache.spark.sql.types.StructType.fromDDL("key1 STRING"))
        self.none = j.scala.Option.empty()
        # resolved once: py4j looks a class name up in the JVM on every use (about 2 ms each,
        # which made building one row cost 11 ms)
        self._object_class = j.java.lang.Object
        self._utf8 = j.org.apache.spark.unsafe.types.UTF8String
        self._generic_row = j.org.apache.spark.sql.catalyst.expressions.GenericInternalRow

    # -- rows -------------------------------------------------------------------------

    def _projection(self, schema):
        """An interpreted UnsafeProjection (py4j cannot call into code-generated classes)."""
        ex = self.jvm.org.apache.spark.sql.catalyst.expressions
        refs = self.jvm.java.util.ArrayList()
        for i, field in enumerate(schema.fields()):
            refs.add(ex.BoundReference(i, field.dataType(), field.nullable()))
        seq = self.jvm.scala.jdk.javaapi.CollectionConverters.asScala(refs).toList()
        return ex.InterpretedUnsafeProjection.createProjection(seq)

    def _row(self, proj, *values):
        arr = self.gw.new_array(self._object_class, len(values))
        for i, v in enumerate(values):
            arr[i] = self._utf8.fromString(v) if isinstance(v, str) else v
        return proj.apply(self._generic_row(arr)).copy()

    def key(self, k1: str, k2: int):
        return self._row(self.key_proj, k1, k2)

    def value(self, v: int):
        return self._row(self.value_proj, v)

    def prefix(self, k1: str):
        return self._row(self.prefix_proj, k1)

    @staticmethod
    def decode_key(row):
        return (row.getUTF8String(0).toString(), row.getInt(1))

    @staticmethod
    def decode_value(row):
        return None if row is None else row.getInt(0)

    def pairs(self, it) -> dict:
        out = {}
        while it.hasNext():
            pair = it.next()
            out[self.decode_key(pair.key())] = self.decode_value(pair.value())
        return out

    # -- providers --------------------------------------------------------------------

    def store_conf(self, **sql):
        conf = self.jvm.org.apache.spark.sql.internal.SQLConf()
        defaults = {"spark.sql.streaming.stateStore.minDeltasForSnapshot": "3",
                    "spark.sql.streaming.minBatchesToRetain": "2"}
        if self.cache_dir is not None:
            defaults[CACHE_DIR_KEY] = self.cache_dir
        for k, v in {**defaults, **sql}.items():
            conf.setConfString(k, str(v))
        return self.pkg.StateStoreConf.apply(conf)

    def provider(self, root: str, cls: str = TTLSTATE, op: int = 0, part: int = 0,
                 store_name: str = "default", prefix_cols: int = 0, conf=None,
                 use_cf=False, multi=False, spec=None, value_schema=None):
        """`value_schema`: a StructType other than (value INT)."""
        store_id = self.pkg.StateStoreId(root, op, part, store_name)
        if spec is None:
            spec = (self.pkg.PrefixKeyScanStateEncoderSpec(self.key_schema, prefix_cols) if prefix_cols
                    else self.pkg.NoPrefixKeyStateEncoderSpec(self.key_schema))
        p = self.pkg.StateStoreProvider.create(cls)
        # as StateStoreProvider.createAndInit does: the query's run id in the Hadoop conf
        hadoop = self.jvm.org.apache.hadoop.conf.Configuration(self.spark._jsc.hadoopConfiguration())
        hadoop.set("sql.streaming.runId", str(uuid.uuid4()))
        p.init(store_id, self.key_schema, self.value_schema if value_schema is None else value_schema, spec, use_cf,
               conf if conf is not None else self.store_conf(), hadoop, multi, self.none)
        return p

    def get_store(self, provider, version: int, unique_id: str | None = None, force_snapshot=False):
        return provider.getStore(version, self.some(unique_id), force_snapshot, False)

    def some(self, value):
        """scala.Option of a Python value (None: scala.None)."""
        return self.none if value is None else self.jvm.scala.Option.apply(value)

    def custom_metrics(self, store) -> dict:
        """{name: value} of a store's custom metrics."""
        m = self.jvm.scala.jdk.javaapi.CollectionConverters.asJava(store.metrics().customMetrics())
        return {k.name(): int(str(v)) for k, v in m.items()}

    @staticmethod
    def checkpoint_ids(store) -> tuple:
        """(checkpoint id, base checkpoint id) of a committed store, each None if absent."""
        info = store.getStateStoreCheckpointInfo()
        opt = lambda o: None if o.isEmpty() else o.get()  # noqa: E731
        return opt(info.stateStoreCkptId()), opt(info.baseStateStoreCkptId())

    def put(self, store, k1, k2, v):
        store.put(self.key(k1, k2), self.value(v), "default")

    def get(self, store, k1, k2):
        return self.decode_value(store.get(self.key(k1, k2), "default"))

    def remove(self, store, k1, k2):
        store.remove(self.key(k1, k2), "default")

    def data(self, store) -> dict:
        return self.pairs(store.iterator("default"))


def new_root(tmp_path) -> str:
    return str(tmp_path / f"state-{uuid.uuid4().hex[:8]}")
