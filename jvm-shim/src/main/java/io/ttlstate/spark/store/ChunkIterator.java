package io.ttlstate.spark.store;

import java.io.Closeable;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.function.Supplier;

import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;

/**
 * Iterates a worker-side iterator chunk by chunk (ITER_OPEN gives the first chunk, ITER_NEXT
 * fetches the rest, ITER_CLOSE frees it when closed early). Yields one reused
 * {@link UnsafeRowPair}; callers copy rows they keep.
 *
 * <p>ITER_OPEN is sent when the iterator is first used, not when it is created: Spark creates
 * iterators it never reads (deduplication's eviction iterator without a watermark), and the
 * worker reads a whole chunk at ITER_OPEN, which with TTL removes the expired entries in it.
 * The iterator sees the transaction as it is when opened. When the JVM's view holds the whole
 * version, opening takes a copy of it instead and the worker is never asked.
 *
 * <p>With a {@link BlockListener} (a join's read-ahead) the iterator also reads ahead: while
 * the caller walks one chunk, the next is already decoded (the listener sees it, to ask for
 * what the caller reads next) and the one after that is asked for with ITER_NEXT sent ahead,
 * so the worker reads it meanwhile (docs/decisions/071-requests-sent-ahead.md).
 */
final class ChunkIterator extends scala.collection.AbstractIterator<UnsafeRowPair> implements Closeable {
    private final WorkerConnection conn;
    /** Sends ITER_OPEN and returns the reply positioned at the iterator handle; null once opened. */
    private Supplier<FrameReader> opener;
    /**
     * Asked first when opening: every entry in chunks of {keys, values} if the JVM holds them
     * (the view's snapshot of a complete version), else null and the worker is asked; may be null.
     */
    private final Supplier<Iterator<byte[][][]>> resident;
    /** The chunks still to walk of an iteration the JVM serves itself; null otherwise. */
    private Iterator<byte[][][]> residentChunks;
    private long iterHandle;
    private final int chunkEntries;
    private final KeyCodec codec;
    private final StoreMetrics metrics;
    private final UnsafeRowPair pair = new UnsafeRowPair(null, null);
    private final UnsafeRow keyRow;
    private final UnsafeRow valueRow;
    private byte[][] keys = new byte[0][];
    private byte[][] values = new byte[0][];
    private int idx;
    /** The worker sent its last chunk (or the resident snapshot has no more). */
    private boolean last;
    private boolean closed;
    /** Read-ahead: the chunk after the current one, decoded {keys, values}; null if none. */
    private byte[][][] queued;
    /** Read-ahead: the ITER_NEXT sent for the chunk after {@link #queued}; null if none. */
    private WorkerConnection.Pending inFlight;
    private Runnable onEnd;
    /** Told about each block of entries before the first of them is handed out; may be null. */
    private BlockListener blockListener;
    /** Where the next block starts (entries before it were announced to the listener). */
    private int nextBlock;

    /** Learns of entries just before the caller walks them (to fetch what it reads next). */
    interface BlockListener {
        /**
         * {@code keys[from..to)} and {@code values[from..to)} (stored bytes) come next, and
         * {@code following} ({keys, values}, or null if not known yet) after this chunk; returns
         * where the part it dealt with ends (in {@code (from, to]}): the next block starts there.
         */
        int block(byte[][] keys, byte[][] values, int from, int to, byte[][][] following);
    }

    ChunkIterator(WorkerConnection conn, Supplier<Iterator<byte[][][]>> resident, Supplier<FrameReader> opener,
                  int chunkEntries, KeyCodec codec, int numValueFields, StoreMetrics metrics) {
        this.conn = conn;
        this.resident = resident;
        this.opener = opener;
        this.chunkEntries = chunkEntries;
        this.codec = codec;
        this.metrics = metrics;
        this.keyRow = codec.newKeyRow();
        this.valueRow = new UnsafeRow(numValueFields);
    }

    /** Opens the worker's iterator and reads the first chunk, unless done already or closed. */
    private void ensureOpened() {
        if (opener == null || closed) {
            return;
        }
        Iterator<byte[][][]> held = resident == null ? null : resident.get();
        if (held != null) {
            opener = null;
            residentChunks = held;
            nextResidentChunk();
            runOnEnd(); // the worker holds no iterator
            return;
        }
        FrameReader r = opener.get();
        opener = null;
        iterHandle = Replies.decode(() -> Reply.iterHandle(r));
        setCurrent(decodeChunk(r));
        readAhead();
    }

    private void nextResidentChunk() {
        byte[][][] chunk = residentChunks.hasNext() ? residentChunks.next() : new byte[][][] {new byte[0][], new byte[0][]};
        keys = chunk[0];
        values = chunk[1];
        idx = 0;
        nextBlock = 0;
        last = !residentChunks.hasNext();
    }

    /** The next chunk: from the JVM's snapshot, read ahead, or ITER_NEXT to the worker. */
    private void fetchNext() {
        if (residentChunks != null) {
            nextResidentChunk();
            return;
        }
        if (queued != null) {
            setCurrent(queued);
            queued = null;
        } else {
            setCurrent(inFlight != null ? awaitAhead() : nextFromWorker());
        }
        readAhead();
    }

    /** Whether chunks remain after the current one. */
    private boolean more() {
        return queued != null || inFlight != null || !last;
    }

    private FrameWriter iterNext() {
        metrics.roundTrip();
        return Requests.iterNext(iterHandle, chunkEntries);
    }

    private byte[][][] nextFromWorker() {
        return decodeChunk(conn.call(iterNext()));
    }

    private byte[][][] awaitAhead() {
        WorkerConnection.Pending p = inFlight;
        inFlight = null;
        return decodeChunk(conn.await(p));
    }

    /**
     * With a block listener, on the worker's chunks: the chunk after the current one decoded
     * ({@link #queued}) and the one after that asked for ({@link #inFlight}).
     */
    private void readAhead() {
        if (blockListener == null || residentChunks != null || closed) {
            return;
        }
        if (queued == null && inFlight != null) {
            queued = awaitAhead();
        } else if (queued == null && !last) {
            queued = nextFromWorker();
        }
        if (!last && inFlight == null) {
            metrics.sentAhead.incrementAndGet();
            inFlight = conn.callAhead(iterNext());
        }
    }

    private void setCurrent(byte[][][] chunk) {
        keys = chunk[0];
        values = chunk[1];
        idx = 0;
        nextBlock = 0;
    }

    /** One ITER_OPEN / ITER_NEXT reply's chunk as {keys, values}; notes the worker's last one. */
    private byte[][][] decodeChunk(FrameReader r) {
        Reply.Chunk chunk = Replies.decode(() -> Reply.chunk(r, false));
        last = chunk.last;
        if (last) {
            runOnEnd();
        }
        return new byte[][][] {chunk.keys, chunk.values};
    }

    /** Announces every block of at most {@code chunkEntries} entries to {@code l} before it is walked. */
    synchronized void onBlock(BlockListener l) {
        blockListener = l;
    }

    /**
     * Runs {@code r} once the worker no longer holds this iterator (at once if it already does
     * not: its last chunk came, it was closed, or the JVM serves it and the worker never held it).
     */
    synchronized void onEnd(Runnable r) {
        onEnd = r;
        if (last || closed || residentChunks != null) {
            runOnEnd();
        }
    }

    private void runOnEnd() {
        Runnable r = onEnd;
        onEnd = null;
        if (r != null) {
            r.run();
        }
    }

    @Override
    public synchronized boolean hasNext() {
        ensureOpened();
        while (idx >= keys.length && more() && !closed) {
            fetchNext();
        }
        return idx < keys.length;
    }

    /** Whether iterating on needs the worker (not opened yet, more chunks to fetch, or a reply to read). */
    synchronized boolean needsWorker() {
        return !closed && (opener != null || (residentChunks == null && (!last || inFlight != null)));
    }

    /**
     * Fetches every remaining chunk into memory, so iteration survives the store being closed
     * on the worker ({@link StoreUsers#endAll} calls this as {@link RemoteStore#close} closes it).
     */
    synchronized void drain() {
        if (!needsWorker()) {
            return;
        }
        ensureOpened();
        java.util.List<byte[]> ks = new java.util.ArrayList<>();
        java.util.List<byte[]> vs = new java.util.ArrayList<>();
        for (int i = idx; i < keys.length; i++) {
            ks.add(keys[i]);
            vs.add(values[i]);
        }
        while (more()) {
            byte[][][] chunk = queued != null ? queued : inFlight != null ? awaitAhead() : nextFromWorker();
            queued = null;
            java.util.Collections.addAll(ks, chunk[0]);
            java.util.Collections.addAll(vs, chunk[1]);
        }
        keys = ks.toArray(new byte[0][]);
        values = vs.toArray(new byte[0][]);
        idx = 0;
        nextBlock = 0;
    }

    @Override
    public synchronized UnsafeRowPair next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        if (blockListener != null && idx >= nextBlock) {
            int end = Math.min(keys.length, idx + Math.max(1, chunkEntries));
            nextBlock = Math.max(idx + 1, Math.min(end, blockListener.block(keys, values, idx, end, queued)));
        }
        codec.decodeKey(keys[idx], keyRow);
        valueRow.pointTo(values[idx], values[idx].length);
        keys[idx] = null;
        values[idx] = null;
        idx++;
        return pair.withRows(keyRow, valueRow);
    }

    /** Frees the worker's iterator if it was opened and not exhausted; idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        residentChunks = null;
        keys = new byte[0][];
        values = new byte[0][];
        queued = null;
        if (inFlight != null) { // its reply says whether the worker still holds the iterator
            try {
                awaitAhead();
            } catch (RuntimeException e) {
                inFlight = null; // the connection is broken: the worker frees it with its transaction
            }
        }
        if (opener == null && !last && iterHandle != 0 && !conn.isBroken()) {
            try {
                metrics.roundTrip();
                conn.call(Requests.iterClose(iterHandle));
            } catch (RuntimeException e) {
                // the worker frees iterators with their transaction anyway
            }
        }
        runOnEnd();
    }
}
