package io.ttlstate.spark.store;

import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;

import io.ttlstate.spark.StateReadAheadSource;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;

/**
 * The rows a streaming aggregation restores the state of, a block at a time, with the block's
 * keys read into the store's cache in one MULTI_GET first (docs/DESIGN.md 68;
 * {@code StateReadAheadExec} runs it under Spark's {@code StateStoreRestoreExec}). The rows are
 * handed on unchanged and in order. A store whose cache answers every key itself (a complete
 * view), or with TTL (a worker read may refresh or expire an entry), is read as before: the
 * rows pass through without being copied.
 */
public final class RestoreReadAhead implements StateReadAheadSource {
    /** At most this many rows (and keys asked) per block. */
    static final int MAX_ROWS_PER_BLOCK = 8192;

    @Override
    public Iterator<InternalRow> wrap(Iterator<InternalRow> rows, UnsafeProjection keyOf, String checkpointLocation,
                                      long operatorId, int partition) {
        return new Blocks(rows, keyOf,
                new StateStoreId(checkpointLocation, operatorId, partition, StateStoreId.DEFAULT_STORE_NAME()));
    }

    private static final class Blocks implements Iterator<InternalRow> {
        private final Iterator<InternalRow> rows;
        private final UnsafeProjection keyOf;
        private final StateStoreId id;
        private InternalRow[] block = new InternalRow[0];
        private int next;
        private int size;
        /** The store needs no read-ahead (or there is none to read for): rows go straight through. */
        private boolean passThrough;

        Blocks(Iterator<InternalRow> rows, UnsafeProjection keyOf, StateStoreId id) {
            this.rows = rows;
            this.keyOf = keyOf;
            this.id = id;
        }

        @Override
        public boolean hasNext() {
            if (next < size) {
                return true;
            }
            return passThrough ? rows.hasNext() : fill();
        }

        @Override
        public InternalRow next() {
            if (!hasNext()) {
                throw new NoSuchElementException();
            }
            if (next < size) {
                InternalRow row = block[next];
                block[next++] = null;
                return row;
            }
            return rows.next();
        }

        /** Takes the next block of rows and reads its keys ahead; false when the input is done. */
        private boolean fill() {
            next = 0;
            size = 0;
            RemoteStore store = LiveStores.get(id);
            RemoteTxn txn = store == null ? null : store.readAheadTxn();
            int room = txn == null ? 0 : Math.min(MAX_ROWS_PER_BLOCK, txn.readAheadRoom());
            if (room == 0) {
                passThrough = true;
                return rows.hasNext();
            }
            if (block.length < room) {
                block = new InternalRow[room];
            }
            byte[][] keys = new byte[room][];
            while (size < room && rows.hasNext()) {
                InternalRow row = rows.next().copy(); // the input may reuse its row
                keys[size] = KeyCodec.bytesOf(keyOf.apply(row));
                block[size++] = row;
            }
            if (size > 0) {
                txn.prefetch(size == room ? keys : Arrays.copyOf(keys, size));
            }
            return size > 0;
        }
    }
}
