package io.ttlstate.spark.store;

import io.ttlstate.spark.compat.ScalaColls;
import io.ttlstate.spark.compat.SparkCompat;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreErrors;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import scala.runtime.BoxedUnit;

/**
 * Spark 4's read-store interface over a {@link StoreCore}: the column-family signatures, with
 * the refusals of HDFSBackedStateStoreProvider (the default column family only, one value per
 * key). A store object is used by one task thread.
 */
abstract class AbstractStore<C extends StoreCore> implements ReadStateStore {
    /** Spark's default column family, spelled out (AbstractStoreTest pins it to Spark's constant). */
    static final String DEFAULT_CF = "default";

    final C core;

    AbstractStore(C core) {
        this.core = core;
        SparkCompat.initReadStore(this);
    }

    @Override
    public StateStoreId id() {
        return core.id();
    }

    @Override
    public long version() {
        return core.version;
    }

    final void checkDefaultColFamily(String colFamilyName) {
        if (!DEFAULT_CF.equals(colFamilyName)) {
            throw SparkErrors.sneaky(StateStoreErrors.multipleColumnFamiliesNotSupported(
                    SparkErrors.PROVIDER_NAME));
        }
    }

    final RuntimeException unsupported(String operation) {
        return SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException(
                operation, SparkErrors.PROVIDER_NAME));
    }

    @Override
    public UnsafeRow get(UnsafeRow key, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        return core.get(key);
    }

    @Override
    public scala.collection.Iterator<UnsafeRow> multiGet(UnsafeRow[] keys, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        return ScalaColls.scalaIterator(core.multiGet(keys).iterator());
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> iterator(String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        return wrap(core.iterate());
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> prefixScan(UnsafeRow prefixKey, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        if (!core.hasPrefix()) {
            throw unsupported("prefixScan without PrefixKeyScanStateEncoderSpec");
        }
        return wrap(core.prefixScan(prefixKey));
    }

    static StateStoreIterator<UnsafeRowPair> wrap(ChunkIterator it) {
        return new StateStoreIterator<>(it, () -> {
            it.close();
            return BoxedUnit.UNIT;
        });
    }

    @Override
    public scala.collection.Iterator<UnsafeRow> valuesIterator(UnsafeRow key, String colFamilyName) {
        throw unsupported("multipleValuesPerKey");
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> prefixScanWithMultiValues(UnsafeRow prefixKey, String colFamilyName) {
        throw unsupported("prefixScanWithMultiValues");
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> iteratorWithMultiValues(String colFamilyName) {
        throw unsupported("iteratorWithMultiValues");
    }

    @Override
    public scala.collection.immutable.Set<String> allColumnFamilyNames() {
        scala.collection.immutable.Set<String> empty = scala.collection.immutable.Set$.MODULE$.empty();
        return empty.incl(DEFAULT_CF);
    }

    @Override
    public String toString() {
        return core.toString();
    }
}
