package io.ttlstate.spark;

import java.io.Closeable;
import java.util.NoSuchElementException;

import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;

/**
 * Iterates a worker-side iterator chunk by chunk (ITER_OPEN gave the first chunk, ITER_NEXT
 * fetches the rest, ITER_CLOSE frees it when closed early). Yields one reused
 * {@link UnsafeRowPair}; callers copy rows they keep.
 */
final class ChunkIterator extends scala.collection.AbstractIterator<UnsafeRowPair> implements Closeable {
    private final WorkerConnection conn;
    private final long iterHandle;
    private final int chunkEntries;
    private final KeyCodec codec;
    private final StoreMetrics metrics;
    private final UnsafeRowPair pair = new UnsafeRowPair(null, null);
    private final UnsafeRow keyRow;
    private final UnsafeRow valueRow;
    private byte[][] keys = new byte[0][];
    private byte[][] values = new byte[0][];
    private int idx;
    private boolean last;
    private boolean closed;

    /** {@code first} is positioned at the first chunk's {@code u8 last} field. */
    ChunkIterator(WorkerConnection conn, long iterHandle, FrameReader first, int chunkEntries,
                  KeyCodec codec, int numValueFields, StoreMetrics metrics) {
        this.conn = conn;
        this.iterHandle = iterHandle;
        this.chunkEntries = chunkEntries;
        this.codec = codec;
        this.metrics = metrics;
        this.keyRow = codec.newKeyRow();
        this.valueRow = new UnsafeRow(numValueFields);
        readChunk(first);
    }

    private void readChunk(FrameReader r) {
        RemoteTxn.checked(() -> {
            last = r.bool();
            int n = r.count(8);
            keys = new byte[n][];
            values = new byte[n][];
            for (int i = 0; i < n; i++) {
                keys[i] = r.bytes();
                values[i] = r.bytes();
            }
            r.end();
            return null;
        });
        idx = 0;
    }

    @Override
    public boolean hasNext() {
        while (idx >= keys.length && !last && !closed) {
            metrics.roundTrip();
            readChunk(conn.call(FrameWriter.request(Op.ITER_NEXT, iterHandle).u32(chunkEntries)));
        }
        return idx < keys.length;
    }

    @Override
    public UnsafeRowPair next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        codec.decodeKey(keys[idx], keyRow);
        valueRow.pointTo(values[idx], values[idx].length);
        keys[idx] = null;
        values[idx] = null;
        idx++;
        return pair.withRows(keyRow, valueRow);
    }

    /** Frees the worker's iterator if it was not exhausted; idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        keys = new byte[0][];
        values = new byte[0][];
        if (!last && iterHandle != 0 && !conn.isBroken()) {
            try {
                metrics.roundTrip();
                conn.call(FrameWriter.request(Op.ITER_CLOSE, iterHandle));
            } catch (RuntimeException e) {
                // the worker frees iterators with their transaction anyway
            }
        }
    }
}
