package io.ttlstate.spark.store;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import io.ttlstate.spark.cache.CachedVersionView;
import io.ttlstate.spark.cache.KeyBytes;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.LiveExpiries;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.protocol.Records;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;
import io.ttlstate.spark.ttl.TtlRule;

/**
 * One transaction on a worker (a BEGIN handle) with the JVM's write-behind buffer: what it
 * forwards to the worker, and how.
 *
 * <p>Puts and removes are appended to a WRITE_BATCH frame and to {@code written}, which
 * answers reads of those keys without a round trip. The frame is sent (no response) when it
 * reaches {@code writeBatchBytes}, and before any request that needs the worker to know the
 * writes (ITER_OPEN, STATS, COMMIT). A read asks the transaction's {@link JvmAnswers} first
 * ({@code written}, then the store's {@link CachedVersionView}: a cached value, or the Bloom
 * filter's "absent") and only then the worker, with GET, which needs no flush: the worker
 * lacks only what {@code written} holds. Its {@link TxnReadAhead} reads keys ahead of the
 * operator.
 *
 * <p>A direct transaction (the worker writes it straight into its database,
 * docs/decisions/040-direct-write-transactions.md)
 * updates the view as it writes and keeps in {@code written} only the writes not sent yet;
 * its commit just moves the view on. Any other keeps all its writes in {@code written}, and
 * its commit applies them to the view. Not thread-safe; one per store.
 */
final class RemoteTxn {
    /** Marks a removed key in {@code written} (compared by identity). */
    static final byte[] TOMBSTONE = new byte[0];

    private final WorkerConnection conn;
    private final long handle;
    private final long version;
    private final boolean readOnly;
    private final long batchTimestampMs;
    private final StoreSettings settings;
    /** {@code expiresAt} of a value this transaction writes. */
    private final long writeExpiry;
    /**
     * EventTime, a write transaction at a watermark past 0: the worker stamped the store's
     * UNSTAMPED entries with this watermark at BEGIN (docs/decisions/104-event-time-jvm-view.md),
     * which the view follows.
     */
    private final boolean stampsUnstamped;
    private final StoreMetrics metrics;
    private final Map<KeyBytes, byte[]> written = new HashMap<>();
    /** What the JVM answers itself: reads from {@code written} and the store's view, presence hints. */
    private final JvmAnswers jvm;
    /** Values of keys the operator reads next, read into the view ahead of it. */
    private final TxnReadAhead ahead;
    private FrameWriter batch;
    /** The last batch's writer once sent, reused for the next (a frame grows to {@code writeBatchBytes} once per transaction). */
    private FrameWriter spareBatch;
    private int batchCount;
    /** Write records this transaction made (the length of its changelog, before a key's later records replace earlier ones). */
    private long records;
    /** Reads answered in the JVM since the last flush, reported to the worker's TTL cleanup. */
    private int unsentAccesses;
    private boolean ended;
    /** The worker writes this transaction straight into its database (an abort leaves it at no version). */
    private boolean direct;
    /**
     * The worker takes this transaction's writes as WRITE_STAMPED frames, each put's value stamped
     * with {@link #stamp} (docs/decisions/111-pre-stamped-ttl-writes.md); their live entries' expiry times in {@link #live}.
     */
    private boolean stamped;
    private long stamp;
    private final LiveExpiries live = new LiveExpiries();
    /**
     * Keys of reads answered here as absent because their cached values had expired, for the
     * next WRITE_STAMPED's tail: the worker cleans them up on read before the frame's records
     * (docs/decisions/112-expired-reads-in-the-frame-tail.md).
     */
    private final java.util.List<byte[]> expiredReads = new java.util.ArrayList<>();
    /** Their bytes on the wire. */
    private long expiredReadBytes;
    /** Told about every iterator (its {@link RemoteStore} drains those still needing the worker on close). */
    java.util.function.Consumer<ChunkIterator> onIteratorCreated;

    private RemoteTxn(WorkerConnection conn, long handle, long version, boolean readOnly, long batchTimestampMs,
                      StoreSettings settings, CachedVersionView view, StoreMetrics metrics) {
        this.conn = conn;
        this.handle = handle;
        this.version = version;
        this.readOnly = readOnly;
        this.batchTimestampMs = batchTimestampMs;
        this.settings = settings;
        this.writeExpiry = settings.ttlEventTime ? TtlRule.eventTimeWriteExpiresAt(batchTimestampMs, settings.ttlMs)
                : TtlRule.expiresAt(batchTimestampMs, settings.ttlMs);
        this.stampsUnstamped = settings.ttlEventTime && !readOnly && batchTimestampMs > 0;
        this.metrics = metrics;
        this.jvm = new JvmAnswers(this, view, readOnly, settings, metrics);
        this.ahead = new TxnReadAhead(this, jvm, conn, metrics);
    }

    /** BEGIN a transaction on {@code storeHandle} at {@code version}, TTL time {@code batchTimestampMs}. */
    static RemoteTxn begin(WorkerConnection conn, long storeHandle, long version, boolean readOnly,
                           long batchTimestampMs, StoreSettings settings, CachedVersionView view,
                           StoreMetrics metrics) {
        int mode = readOnly ? Op.BEGIN_READ_ONLY : settings.snapshotMode ? Op.BEGIN_WRITE_NO_CHANGELOG : Op.BEGIN_WRITE;
        FrameReader r = conn.call(Requests.begin(storeHandle, version, mode, batchTimestampMs));
        metrics.roundTrip();
        Reply.Begun begun = Replies.decode(() -> Reply.begin(r));
        RemoteTxn txn = new RemoteTxn(conn, begun.txnHandle, version, readOnly, batchTimestampMs, settings, view,
                metrics);
        txn.direct = begun.direct;
        txn.stamped = begun.stamped;
        txn.stamp = begun.stamp;
        txn.jvm.begun();
        return txn;
    }

    long handle() {
        return handle;
    }

    /** Whether the worker stamped the store's UNSTAMPED entries at this transaction's BEGIN, if it had any (EventTime). */
    boolean stampsUnstamped() {
        return stampsUnstamped;
    }

    /** The batch timestamp the transaction was begun with (-1 if unknown). */
    long batchTimestampMs() {
        return batchTimestampMs;
    }

    boolean isEnded() {
        return ended;
    }

    void put(byte[] key, byte[] value) {
        KeyBytes k = new KeyBytes(key); // hashed once for this transaction's maps
        long s = jvm.stored(k);
        if (stamped) {
            putStamped(key, value, s);
        } else if (s == CachedVersionView.NOT_STORED) {
            Records.putNew(batch(), key, value);
        } else if (s == CachedVersionView.STORED_UNKNOWN) {
            Records.put(batch(), key, value);
        } else if (settings.ttlMs == 0) {
            Records.putOver(batch(), key, value);
        } else {
            Records.putOverLive(batch(), key, value, s);
        }
        buffered(k, value);
    }

    /** A put of a stamped transaction; {@code s} as {@link JvmAnswers#stored} gives it. */
    private void putStamped(byte[] key, byte[] value, long s) {
        if (s == CachedVersionView.NOT_STORED) {
            Records.stampedPut(batch(), Op.RECORD_PUT_NEW, key, stamp, value);
        } else if (s == CachedVersionView.STORED_UNKNOWN) {
            Records.stampedPut(batch(), Op.RECORD_PUT, key, stamp, value);
        } else {
            Records.stampedPut(batch(), Op.RECORD_PUT_OVER, key, stamp, value);
            live.add(s);
        }
    }

    void remove(byte[] key) {
        KeyBytes k = new KeyBytes(key);
        long s = jvm.stored(k);
        if (s == CachedVersionView.NOT_STORED) {
            keep(k, TOMBSTONE); // nothing to remove: the worker need not know
            if (settings.ttlMs != 0) {
                answeredHere(); // the access the worker's remove would have counted for its cleanup
            }
            return;
        }
        if (s == CachedVersionView.STORED_UNKNOWN) {
            Records.remove(batch(), key);
        } else if (settings.ttlMs == 0) {
            Records.removePresent(batch(), key);
        } else if (stamped) {
            Records.removePresent(batch(), key);
            live.add(s);
        } else {
            Records.removeLive(batch(), key, s);
        }
        buffered(k, TOMBSTONE);
    }

    /** Records a write just appended to the batch; sends the batch once it is big enough. */
    private void buffered(KeyBytes k, byte[] writtenValue) {
        batchCount++;
        records++;
        keep(k, writtenValue);
        flushIfFull();
    }

    /** Sends the frame once it, with the expired reads' keys for its tail, reaches {@code writeBatchBytes}. */
    private void flushIfFull() {
        if (batch().size() + expiredReadBytes >= settings.writeBatchBytes) {
            flush();
        }
    }

    /** Keeps a write in {@code written}; a read-ahead in flight and (direct) the view learn of it. */
    private void keep(KeyBytes k, byte[] writtenValue) {
        written.put(k, writtenValue);
        ahead.written(k);
        jvm.wrote(k, writtenValue == TOMBSTONE ? null : writtenValue);
    }

    /** The value of {@code key} as this transaction sees it, or null. */
    byte[] get(byte[] key) {
        byte[][] out = new byte[1][];
        if (jvm.answer(key, out, 0, !ahead.inFlight())) {
            return out[0];
        }
        if (ahead.inFlight()) {
            ahead.complete(); // it may bring this key
            if (jvm.answer(key, out, 0, true)) {
                return out[0];
            }
        }
        FrameReader r = call(Requests.get(handle, key));
        return jvm.takeAnswer(key, Replies.decode(() -> Reply.get(r)));
    }

    /**
     * The values of {@code keys} (null where absent): what the JVM knows answers at once, the
     * rest goes to the worker in one MULTI_GET.
     */
    byte[][] multiGet(byte[][] keys) {
        return values(keys, false);
    }

    /**
     * {@link #multiGet} for a read-ahead that needs the values to know what to read next (a
     * join's counts, {@link JoinInputReadAhead}): counts no read, refreshes nothing, and adds
     * what the worker answered to {@code prefetched}. Only for a transaction with a view whose
     * worker reads do nothing the operator's reads would not ({@link #prefetchRoom} above 0).
     */
    byte[][] readAhead(byte[][] keys) {
        return values(keys, true);
    }

    private byte[][] values(byte[][] keys, boolean readAhead) {
        ahead.complete();
        byte[][] out = new byte[keys.length][];
        int[] ask = new int[keys.length];
        int n = 0;
        for (int i = 0; i < keys.length; i++) {
            if (!(readAhead ? jvm.known(keys[i], out, i) : jvm.answer(keys[i], out, i))) {
                ask[n++] = i;
            }
        }
        if (n == 0) {
            return out;
        }
        byte[][] asked = new byte[n][];
        for (int j = 0; j < n; j++) {
            asked[j] = keys[ask[j]];
        }
        byte[][] values = fromWorker(asked, n);
        for (int j = 0; j < n; j++) {
            out[ask[j]] = values[j];
        }
        if (readAhead) {
            metrics.prefetched.addAndGet(n);
        }
        return out;
    }

    /**
     * The values of {@code keys[0..n)} from the worker, remembered in the view: one MULTI_GET,
     * and another for the rest as long as a request holds only the first keys (keys past
     * {@link #MULTI_GET_REQUEST_BYTES}) or a reply answers only the first keys it asked (values
     * past {@code MULTI_GET_REPLY_BYTES}, docs/PROTOCOL.md).
     */
    byte[][] fromWorker(byte[][] keys, int n) {
        byte[][] values = new byte[n][];
        for (int done = 0; done < n; ) {
            int end = requestEnd(keys, done, n);
            done += readAnswers(call(Requests.multiGet(handle, keys, done, end)), keys, done, end, values,
                    java.util.Collections.emptySet());
        }
        return values;
    }

    /** Key bytes one MULTI_GET request asks at most (half a frame; at least one key):
     * docs/decisions/099-multi-get-request-limit.md. */
    static final long MULTI_GET_REQUEST_BYTES = Op.MAX_FRAME / 2;

    /**
     * The end of the MULTI_GET that asks {@code keys[from..n)}: the first keys whose encoding
     * ({@code bytes key}: 4 + length each) fits {@link #MULTI_GET_REQUEST_BYTES}, at least one.
     */
    static int requestEnd(byte[][] keys, int from, int n) {
        long size = 0;
        int end = from;
        while (end < n) {
            size += 4L + keys[end].length;
            if (size > MULTI_GET_REQUEST_BYTES && end > from) {
                break;
            }
            end++;
        }
        return end;
    }

    /**
     * Reads a MULTI_GET reply for {@code keys[from..n)}: the answers of the first of them
     * (at least one) into {@code values} and the view, except those in {@code skip} (read past,
     * left null). Returns how many keys it answered.
     */
    int readAnswers(FrameReader r, byte[][] keys, int from, int n, byte[][] values, Set<KeyBytes> skip) {
        Reply.Answer[] answers = Replies.decode(() -> Reply.multiGet(r, n - from));
        for (int i = 0; i < answers.length; i++) {
            int j = from + i;
            if (!skip.contains(new KeyBytes(keys[j]))) {
                values[j] = jvm.takeAnswer(keys[j], answers[i]);
            }
        }
        return answers.length;
    }

    /** {@link TxnReadAhead#prefetch}: reads into the view the values of {@code keys} the JVM cannot answer. */
    int prefetch(byte[][] keys) {
        return ahead.prefetch(keys);
    }

    /** {@link TxnReadAhead#prefetchAhead}: {@link #prefetch} sent ahead, read by {@link #completeAhead}. */
    int prefetchAhead(byte[][] keys) {
        return ahead.prefetchAhead(keys);
    }

    /** {@link TxnReadAhead#complete}: reads the answer of a MULTI_GET sent ahead, if any. */
    void completeAhead() {
        ahead.complete();
    }

    /** {@link JvmAnswers#prefetchRoom}: how many values a read-ahead may bring into the view at once. */
    int prefetchRoom() {
        return jvm.prefetchRoom();
    }

    /** {@link JvmAnswers#readAheadRoom}: how many keys a read-ahead of the operator's next reads may ask. */
    int readAheadRoom() {
        return jvm.readAheadRoom();
    }

    /**
     * Whether a read of a value the view holds expired may be answered here (absent) and the key
     * sent in the frame's tail for the worker's cleanup on read: a stamped transaction, where the
     * worker's read would not return it (NeverReturnExpired).
     */
    boolean listsExpiredReads() {
        return stamped && !settings.ttlReturnExpired;
    }

    /** A read answered absent here of a key whose value expired ({@link #listsExpiredReads}). */
    void readExpired(byte[] key) {
        answeredHere();
        expiredReads.add(key);
        expiredReadBytes += 4 + key.length;
        flushIfFull();
    }

    /** A read the worker did not see: counted towards its incremental TTL cleanup. */
    void answeredHere() {
        if (settings.ttlCountsAccesses && !readOnly) {
            unsentAccesses++;
        }
    }

    /**
     * Sends the buffered writes (and reads answered here), if any, as one WRITE_BATCH, or as one
     * WRITE_STAMPED with the reads, the live entries' expiry times and the expired reads' keys in its tail.
     */
    void flush() {
        if (!stamped && unsentAccesses > 0) {
            Records.access(batch(), unsentAccesses);
            batchCount++;
            unsentAccesses = 0;
        }
        if (batchCount == 0 && unsentAccesses == 0 && expiredReads.isEmpty()) {
            return;
        }
        FrameWriter b = stamped ? Requests.writeStampedEnd(batch(), batchCount, unsentAccesses, live, expiredReads)
                : Requests.writeBatchCount(batch, batchCount);
        live.clear();
        expiredReads.clear();
        expiredReadBytes = 0;
        unsentAccesses = 0;
        batch = null;
        batchCount = 0;
        if (direct) {
            written.clear(); // the worker's database has them now (and the view, if any)
        }
        conn.send(b);
        spareBatch = b; // sent (written out): its grown buffer serves the next batch
    }

    /** The transaction's writes (key to value, {@link #TOMBSTONE} for a removal); for the view at commit. */
    Map<KeyBytes, byte[]> written() {
        return written;
    }

    /** {@code expiresAt} of the values this transaction wrote. */
    long writeExpiry() {
        return writeExpiry;
    }

    long version() {
        return version;
    }

    boolean isDirect() {
        return direct;
    }

    /**
     * An iterator over the keys starting with {@code prefix} (all keys if empty), opened on the
     * worker (after a flush) when first used; see {@link ChunkIterator}.
     */
    ChunkIterator iterate(byte[] prefix, KeyCodec codec, int numValueFields) {
        int chunkEntries = settings.iteratorChunkEntries;
        ChunkIterator it = new ChunkIterator(conn, () -> jvm.residentEntries(prefix), () -> {
            flush();
            return call(Requests.iterOpen(handle, prefix, chunkEntries, Op.ITER_PAIRS));
        }, chunkEntries, codec, numValueFields, metrics);
        if (onIteratorCreated != null) {
            onIteratorCreated.accept(it);
        }
        return it;
    }

    /** STATS after a flush: {numKeys, memoryUsedBytes}; the worker's metrics go to {@link StoreMetrics}. */
    long[] stats() {
        flush();
        FrameReader r = call(Requests.stats(handle));
        Reply.Stats s = Replies.decode(() -> Reply.stats(r));
        metrics.workerMetrics(s.metrics);
        return new long[] {s.numKeys, s.memoryUsedBytes};
    }

    /**
     * COMMIT as {@code newVersion} (format v2: checkpoint id {@code id} on {@code baseId}),
     * writing the changelog to {@code changelogPath} (empty: no changelog); the reply's metrics
     * go to the store's metrics.
     */
    Reply.Committed commit(long newVersion, String changelogPath, String id, String baseId) {
        ahead.drop();
        flush();
        FrameReader r;
        try {
            r = call(Requests.commit(handle, newVersion, changelogPath, id, baseId));
        } finally {
            ended = true; // COMMIT ends the transaction, and a failed one leaves it unusable
            spareBatch = null;
        }
        Reply.Committed c = Replies.decode(() -> Reply.commit(r));
        metrics.workerMetrics(c.metrics);
        return c;
    }

    /** Write records this transaction made (puts and removes). */
    long records() {
        return records;
    }

    /** ABORT, dropping unsent writes; idempotent. */
    void abort() {
        ahead.drop();
        batch = null;
        spareBatch = null;
        batchCount = 0;
        unsentAccesses = 0;
        live.clear();
        expiredReads.clear();
        expiredReadBytes = 0;
        written.clear();
        if (ended) {
            return;
        }
        try {
            if (!conn.isBroken()) {
                FrameReader r = call(Requests.abort(handle));
                Replies.decode(() -> {
                    Reply.empty(r);
                    return null;
                });
            }
        } finally {
            ended = true; // even if ABORT failed: the transaction is not to be used again
        }
    }

    private FrameReader call(FrameWriter w) {
        if (ended) {
            throw new IllegalStateException("ttlstate transaction " + handle + " has ended");
        }
        metrics.roundTrip();
        return conn.call(w);
    }

    private FrameWriter batch() {
        if (ended) {
            throw new IllegalStateException("ttlstate transaction " + handle + " has ended");
        }
        if (batch == null) {
            FrameWriter w = spareBatch == null ? new FrameWriter() : spareBatch;
            spareBatch = null;
            batch = stamped ? Requests.writeStamped(w, handle, stamp) : Requests.writeBatch(w, handle);
        }
        return batch;
    }
}
