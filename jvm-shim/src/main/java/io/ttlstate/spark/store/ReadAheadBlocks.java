package io.ttlstate.spark.store;

import java.util.Iterator;
import java.util.NoSuchElementException;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;

/**
 * An operator's input rows, a block at a time, with what the block's keys will read from the
 * state asked for first ({@link Reader}); the rows are handed on unchanged and in order. While
 * the reader has nothing to do (its stores' caches answer every key, or have TTL) a block's
 * worth of rows passes through without being copied, and then the reader is asked again: a
 * cache that held its whole state may lose that within a batch.
 */
final class ReadAheadBlocks implements Iterator<InternalRow> {
    /**
     * At most this many rows (and keys) per block. An aggregation's block goes to the worker
     * in one MULTI_GET of sorted keys, read in slices: the more keys, the more of them share
     * a data block (docs/decisions/086-sorted-read-ahead-blocks.md); a join's blocks stay smaller
     * ({@link JoinInputReadAhead}).
     */
    static final int MAX_ROWS_PER_BLOCK = 1 << 16;
    /** Rows passed through untouched before the reader is asked again whether it has room. */
    static final int PASS_THROUGH_ROWS = 8192;

    /** What a block's keys will read, asked for ahead
     * (docs/decisions/068-aggregation-read-ahead.md, docs/decisions/072-join-input-read-ahead.md). */
    interface Reader {
        /** How many rows the next block may hold (0: no read-ahead). */
        int room();

        /** Reads ahead the state of {@code keys[0..n)} (the key rows' bytes). */
        void readAhead(byte[][] keys, int n);
    }

    private final Iterator<InternalRow> rows;
    private final UnsafeProjection keyOf;
    private final Reader reader;
    private InternalRow[] block = new InternalRow[0];
    private byte[][] keys = new byte[0][];
    private int next;
    private int size;
    /** Rows still to pass through before the reader is asked again. */
    private int passThrough;

    ReadAheadBlocks(Iterator<InternalRow> rows, UnsafeProjection keyOf, Reader reader) {
        this.rows = rows;
        this.keyOf = keyOf;
        this.reader = reader;
    }

    @Override
    public boolean hasNext() {
        if (next < size) {
            return true;
        }
        return passThrough > 0 ? rows.hasNext() : fill();
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
        passThrough--;
        return rows.next();
    }

    /** Takes the next block of rows and reads its keys' state ahead; false when the input is done. */
    private boolean fill() {
        next = 0;
        size = 0;
        int room = Math.min(MAX_ROWS_PER_BLOCK, reader.room());
        if (room <= 0) {
            passThrough = PASS_THROUGH_ROWS;
            return rows.hasNext();
        }
        if (block.length < room) {
            block = new InternalRow[room];
            keys = new byte[room][];
        }
        while (size < room && rows.hasNext()) {
            InternalRow row = rows.next().copy(); // the input may reuse its row
            keys[size] = KeyCodec.bytesOf(keyOf.apply(row));
            block[size++] = row;
        }
        if (size > 0) {
            reader.readAhead(keys, size);
            java.util.Arrays.fill(keys, 0, size, null);
        }
        return size > 0;
    }
}
