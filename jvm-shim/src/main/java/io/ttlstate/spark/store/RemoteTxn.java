package io.ttlstate.spark.store;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import io.ttlstate.spark.cache.CachedVersionView;
import io.ttlstate.spark.cache.KeyBytes;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.protocol.Records;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;
import io.ttlstate.spark.ttl.TtlRule;

/**
 * One transaction on a worker (a BEGIN handle) with the JVM's write-behind buffer.
 *
 * <p>Puts and removes are appended to a WRITE_BATCH frame and to {@code written}, which
 * answers reads of those keys without a round trip. The frame is sent (no response) when it
 * reaches {@code writeBatchBytes}, and before any request that needs the worker to know the
 * writes (ITER_OPEN, STATS, COMMIT). A read of a key not in {@code written} asks the
 * store's {@link CachedVersionView} (a cached value, or the Bloom filter's "absent") and only then
 * the worker, with GET, which needs no flush: the worker lacks only what {@code written} holds.
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
    /** The store's view of {@code version}, or null if this transaction may not use it. */
    private final CachedVersionView view;
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
    /**
     * What the worker stored for each key it answered a read of and the view could not keep
     * (write transactions that may give presence hints): {@link CachedVersionView#NOT_STORED},
     * or the entry's {@code expiresAt} ({@code Long.MAX_VALUE} without TTL; with TTL only a
     * live entry's); the presence hint of the key's first write in a state larger than the
     * cache. Only those keys, so a read-ahead the view holds (a join's) fills no map. Bounded
     * by {@link #MAX_ANSWERED}.
     */
    private Map<KeyBytes, Long> answered;
    static final int MAX_ANSWERED = 1 << 18;
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
    /** A read-ahead's MULTI_GET sent ahead ({@link #prefetchAhead}), its reply not read yet; or null. */
    private WorkerConnection.Pending ahead;
    private byte[][] aheadKeys;
    /** Keys written while {@link #ahead} was in flight: its answer for them is older than the write. */
    private Set<KeyBytes> writtenWhileAhead;
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
        this.view = view != null && settings.viewUsable(batchTimestampMs) ? view : null;
        this.writeExpiry = settings.ttlEventTime ? TtlRule.eventTimeWriteExpiresAt(batchTimestampMs, settings.ttlMs)
                : TtlRule.expiresAt(batchTimestampMs, settings.ttlMs);
        this.stampsUnstamped = settings.ttlEventTime && !readOnly && batchTimestampMs > 0;
        this.metrics = metrics;
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
        if (txn.stampsUnstamped && txn.direct && txn.view != null) {
            // the worker wrote the stamps into its database: the view follows at once (a
            // transaction with an overlay has them applied at its commit, RemoteStore.commit)
            txn.view.stamped(version, batchTimestampMs, settings.ttlMs);
        }
        return txn;
    }

    long handle() {
        return handle;
    }

    /**
     * The expiry time in this transaction of a committed entry the view holds as expiring at
     * {@code expiresAt}: the stamped one if this transaction stamps (the view of a transaction
     * with an overlay follows its stamps only at its commit).
     */
    private long expiresHere(long expiresAt) {
        return stampsUnstamped ? TtlRule.eventTimeStamped(expiresAt, batchTimestampMs, settings.ttlMs) : expiresAt;
    }

    /** Whether this transaction's read of a cached value that expires at {@code expiresAt} refreshes it (OnReadAndWrite). */
    private boolean refreshes(long expiresAt) {
        return settings.ttlEventTime ? TtlRule.eventTimeRefreshes(expiresHere(expiresAt), batchTimestampMs, settings.ttlMs)
                : TtlRule.refreshes(expiresAt, batchTimestampMs, settings.ttlMs);
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
        long s = stored(k);
        if (s == CachedVersionView.NOT_STORED) {
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

    void remove(byte[] key) {
        KeyBytes k = new KeyBytes(key);
        long s = stored(k);
        if (s == CachedVersionView.NOT_STORED) {
            written.put(k, TOMBSTONE); // nothing to remove: the worker need not know
            noteWrittenWhileAhead(k);
            if (direct && view != null) {
                view.written(k, null, writeExpiry, version);
            }
            if (settings.ttlMs != 0) {
                answeredHere(); // the access the worker's remove would have counted for its cleanup
            }
            return;
        }
        if (s == CachedVersionView.STORED_UNKNOWN) {
            Records.remove(batch(), key);
        } else if (settings.ttlMs == 0) {
            Records.removePresent(batch(), key);
        } else {
            Records.removeLive(batch(), key, s);
        }
        buffered(k, TOMBSTONE);
    }

    /**
     * What the worker will find stored for {@code key} when it applies this write, if the view
     * (or the worker's answer to a read of it, {@link #answered}) knows and it matters:
     * {@link CachedVersionView#NOT_STORED}, {@link CachedVersionView#STORED_UNKNOWN}, or the
     * stored entry's {@code expiresAt} ({@link CachedVersionView#stored}). With TTL (a
     * transaction whose clock the JVM knows: the view's,
     * docs/decisions/102-ttl-batch-clock-fast-paths.md) only a live entry's, as
     * the worker deletes expired ones on its own (cleanup on read, incremental cleanup,
     * compaction filter) but never a live one, and "not stored" only from the key filter,
     * which holds every stored key; the worker takes the old entry's timestamp for its
     * histogram from {@code expiresAt}. A transaction writing into the database changes the
     * view as it writes (sent or not: the worker applies a key's records in order), so the
     * view answers for any write; for one with an overlay the view is the committed version,
     * so only a key's first write may ask it. The worker's answer tells what was stored before
     * the key was written: its first write takes it out of {@code answered}. The view follows
     * this transaction alone: the worker begins no other transaction on the store while a
     * direct one is open, and a reload or a lost connection resets the view to no version,
     * where it answers STORED_UNKNOWN.
     */
    private long stored(KeyBytes k) {
        if (readOnly || !hints()) {
            return CachedVersionView.STORED_UNKNOWN;
        }
        Long found = answered == null ? null : answered.remove(k);
        if (!direct && written.containsKey(k)) {
            return CachedVersionView.STORED_UNKNOWN;
        }
        long s = view == null ? CachedVersionView.STORED_UNKNOWN
                : view.stored(k, version, batchTimestampMs, settings.ttlMs != 0);
        if (s == CachedVersionView.STORED_UNKNOWN && found != null) {
            return found;
        }
        return s;
    }

    /** Whether this transaction's writes may carry presence hints: without TTL, or with the view's (batch) clock. */
    private boolean hints() {
        return settings.ttlMs == 0 || view != null;
    }

    /** Records a write just appended to the batch; sends the batch once it is big enough. */
    private void buffered(KeyBytes k, byte[] writtenValue) {
        batchCount++;
        records++;
        written.put(k, writtenValue);
        noteWrittenWhileAhead(k);
        if (direct && view != null) {
            view.written(k, writtenValue == TOMBSTONE ? null : writtenValue, writeExpiry, version);
        }
        if (batch.size() >= settings.writeBatchBytes) {
            flush();
        }
    }

    /** The value of {@code key} as this transaction sees it, or null. */
    byte[] get(byte[] key) {
        byte[][] out = new byte[1][];
        if (answerHere(key, out, 0, ahead == null)) {
            return out[0];
        }
        if (ahead != null) {
            completeAhead(); // it may bring this key
            if (answerHere(key, out, 0, true)) {
                return out[0];
            }
        }
        FrameReader r = call(Requests.get(handle, key));
        return takeAnswer(key, Replies.decode(() -> Reply.get(r)));
    }

    /**
     * Answers a read of {@code key} into {@code out[i]} from this transaction's writes or the
     * view (a live cached value, or the filter's "absent"); false if the worker must answer.
     */
    private boolean answerHere(byte[] key, byte[][] out, int i) {
        return answerHere(key, out, i, true);
    }

    /** {@link #answerHere}; without {@code count}, a miss is not counted (the caller asks again). */
    private boolean answerHere(byte[] key, byte[][] out, int i, boolean count) {
        byte[] v = ownWrite(key);
        if (v != null) {
            answeredHere();
            out[i] = v == TOMBSTONE ? null : v;
            return true;
        }
        if (view == null) {
            return false;
        }
        CachedVersionView.Cached c = view.lookup(key, version, batchTimestampMs);
        if (c == CachedVersionView.ABSENT) {
            metrics.filterSkips.incrementAndGet();
            answeredHere();
            out[i] = null;
            return true;
        }
        if (c == null) {
            if (count) {
                metrics.cacheMisses.incrementAndGet();
            }
            return false;
        }
        metrics.cacheHits.incrementAndGet();
        if (settings.ttlRefreshOnRead && !readOnly && refreshes(c.expiresAt)) {
            put(key, c.value); // the refresh the worker's read would have made (an access too)
        } else {
            answeredHere();
        }
        out[i] = c.value;
        return true;
    }

    /** The worker's answer to a read of {@code key} (GET, MULTI_GET), remembered in the view; its value. */
    private byte[] takeAnswer(byte[] key, Reply.Answer answer) {
        byte[] value = answer.value;
        long expiresAt = answer.expiresAt;
        if (value != null && view != null) {
            view.remember(key, value, expiresAt, version);
        }
        if (!readOnly && hints()) {
            KeyBytes k = new KeyBytes(key);
            if (view == null || view.stored(k, version, batchTimestampMs, settings.ttlMs != 0)
                    == CachedVersionView.STORED_UNKNOWN) {
                answered(k, value, expiresAt);
            }
        }
        return value;
    }

    /**
     * Remembers what the worker answered for {@code k} as {@link #answered}: a write
     * transaction's read of an expired entry deleted it (cleanup on read), so an absent answer
     * means not stored; with TTL a value counts only if live at this transaction's clock (an
     * expired one returned under {@code ReturnExpiredIfNotCleanedUp} was deleted by the read).
     */
    private void answered(KeyBytes k, byte[] value, long expiresAt) {
        long s;
        if (value == null) {
            s = CachedVersionView.NOT_STORED;
        } else if (settings.ttlMs == 0) {
            s = Long.MAX_VALUE;
        } else if (!TtlRule.expired(expiresAt, batchTimestampMs) && expiresAt != Long.MAX_VALUE) {
            s = expiresAt;
        } else {
            return;
        }
        if (answered == null) {
            answered = new HashMap<>();
        }
        if (answered.size() < MAX_ANSWERED) {
            answered.put(k, s);
        }
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
        completeAhead();
        byte[][] out = new byte[keys.length][];
        int[] ask = new int[keys.length];
        int n = 0;
        for (int i = 0; i < keys.length; i++) {
            if (!(readAhead ? knownHere(keys[i], out, i) : answerHere(keys[i], out, i))) {
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

    /** This transaction's write of {@code key} ({@link #TOMBSTONE} for a removal), or null. */
    private byte[] ownWrite(byte[] key) {
        return written.isEmpty() ? null : written.get(new KeyBytes(key));
    }

    /** {@link #answerHere} without its side effects (metrics, accesses, refresh on read). */
    private boolean knownHere(byte[] key, byte[][] out, int i) {
        byte[] v = ownWrite(key);
        if (v != null) {
            out[i] = v == TOMBSTONE ? null : v;
            return true;
        }
        CachedVersionView.Cached c = view.lookup(key, version, batchTimestampMs);
        if (c == null) {
            return false;
        }
        out[i] = c == CachedVersionView.ABSENT ? null : c.value;
        return true;
    }

    /**
     * The values of {@code keys[0..n)} from the worker, remembered in the view: one MULTI_GET,
     * and another for the rest as long as a request holds only the first keys (keys past
     * {@link #MULTI_GET_REQUEST_BYTES}) or a reply answers only the first keys it asked (values
     * past {@code MULTI_GET_REPLY_BYTES}, docs/PROTOCOL.md).
     */
    private byte[][] fromWorker(byte[][] keys, int n) {
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
    private int readAnswers(FrameReader r, byte[][] keys, int from, int n, byte[][] values, Set<KeyBytes> skip) {
        Reply.Answer[] answers = Replies.decode(() -> Reply.multiGet(r, n - from));
        for (int i = 0; i < answers.length; i++) {
            int j = from + i;
            if (!skip.contains(new KeyBytes(keys[j]))) {
                values[j] = takeAnswer(keys[j], answers[i]);
            }
        }
        return answers.length;
    }

    /**
     * Reads into the view, in one MULTI_GET, the values of those {@code keys} that neither
     * this transaction's writes nor the view can answer, for reads the operator makes next
     * ({@link JoinPrefetch}). Only where a worker read does nothing the operator's would not
     * ({@link StoreSettings#readsLikeTheWorker}: with TTL, it may clean up an expired entry,
     * which no read sees); counts nothing as a read. Returns the keys asked.
     */
    int prefetch(byte[][] keys) {
        completeAhead();
        byte[][] ask = unknown(keys);
        if (ask.length == 0) {
            return 0;
        }
        fromWorker(ask, ask.length);
        metrics.prefetched.addAndGet(ask.length);
        return ask.length;
    }

    /**
     * {@link #prefetch} sent ahead: the MULTI_GET goes now, its answer reaches the view when
     * {@link #completeAhead} reads it (before any later read of the worker needs it). One at a
     * time: an earlier one is completed first. Returns the keys asked.
     */
    int prefetchAhead(byte[][] keys) {
        completeAhead();
        byte[][] ask = unknown(keys);
        if (ask.length == 0) {
            return 0;
        }
        int end = requestEnd(ask, 0, ask.length); // keys past a request's bytes: the operator reads them
        if (end < ask.length) {
            ask = java.util.Arrays.copyOf(ask, end);
        }
        metrics.roundTrip();
        metrics.sentAhead.incrementAndGet();
        ahead = conn.callAhead(Requests.multiGet(handle, ask, 0, ask.length));
        aheadKeys = ask;
        writtenWhileAhead = new HashSet<>();
        return ask.length; // counted in prefetched once answered (completeAhead)
    }

    /**
     * Reads the answer of the MULTI_GET sent ahead into the view, except for keys written since
     * it was sent (the worker answered with what they held before); nothing if none is in flight.
     */
    void completeAhead() {
        WorkerConnection.Pending p = ahead;
        if (p == null) {
            return;
        }
        byte[][] keys = aheadKeys;
        Set<KeyBytes> skip = writtenWhileAhead;
        dropAhead();
        // a read-ahead: keys past the reply's first ones stay unread, the operator reads them
        int answered = readAnswers(conn.await(p), keys, 0, keys.length, new byte[keys.length][], skip);
        int read = answered;
        for (int j = 0; j < answered && !skip.isEmpty(); j++) {
            if (skip.contains(new KeyBytes(keys[j]))) {
                read--; // written meanwhile: not brought into the view
            }
        }
        metrics.prefetched.addAndGet(read);
    }

    private void noteWrittenWhileAhead(KeyBytes key) {
        if (writtenWhileAhead != null) {
            writtenWhileAhead.add(key);
        }
    }

    /**
     * Those of {@code keys} neither this transaction's writes nor the view can answer (none
     * without a view, or where a worker read does more than the operator's would).
     */
    private byte[][] unknown(byte[][] keys) {
        if (view == null || ended || !settings.readsLikeTheWorker(false)) {
            return new byte[0][];
        }
        byte[][] ask = new byte[keys.length][];
        int n = 0;
        for (byte[] key : keys) {
            if (!written.containsKey(new KeyBytes(key)) && view.lookup(key, version, batchTimestampMs) == null) {
                ask[n++] = key;
            }
        }
        return n == ask.length ? ask : java.util.Arrays.copyOf(ask, n);
    }

    /**
     * How many values a read-ahead may bring into the view at once (0: none; see
     * {@link CachedVersionView#prefetchRoom}).
     */
    int prefetchRoom() {
        return view == null || ended || !settings.readsLikeTheWorker(false) ? 0 : view.prefetchRoom();
    }

    /**
     * How many keys a read-ahead of the operator's next reads may ask for at once: {@link #prefetchRoom},
     * or 0 when the view holds every entry (nothing to spare).
     */
    int readAheadRoom() {
        int room = prefetchRoom();
        return room == 0 || view.isComplete() ? 0 : room;
    }

    /** A read the worker did not see: counted towards its incremental TTL cleanup. */
    private void answeredHere() {
        if (settings.ttlCountsAccesses && !readOnly) {
            unsentAccesses++;
        }
    }

    /** Sends the buffered writes (and reads answered here), if any, as one WRITE_BATCH. */
    void flush() {
        if (unsentAccesses > 0) {
            Records.access(batch(), unsentAccesses);
            batchCount++;
            unsentAccesses = 0;
        }
        if (batchCount == 0) {
            return;
        }
        FrameWriter b = batch;
        Requests.writeBatchCount(b, batchCount);
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
        ChunkIterator it = new ChunkIterator(conn, () -> residentEntries(prefix), () -> {
            flush();
            return call(Requests.iterOpen(handle, prefix, chunkEntries, Op.ITER_PAIRS));
        }, chunkEntries, codec, numValueFields, metrics);
        if (onIteratorCreated != null) {
            onIteratorCreated.accept(it);
        }
        return it;
    }

    /**
     * Every entry this transaction sees whose key starts with {@code prefix} (all if empty),
     * served from the JVM when the view holds the whole version and a worker iterator would do
     * nothing the operator could see ({@link StoreSettings#readsLikeTheWorker}: with TTL the
     * view holds every live entry, and the scan leaves out those expired at the transaction's
     * clock, as the worker's iterator does; it cleans up none, which no read sees); else null. A direct
     * transaction's view already shows its writes; any other's writes (of the prefix) overlay
     * the view's snapshot. All entries: chunks of at most {@code chunkEntries} {keys, values},
     * copied out as walked ({@link CachedVersionView#entriesIfComplete}); a prefix's: one chunk
     * copied now ({@link CachedVersionView#withPrefixIfComplete}), in the cache's order: Spark
     * requires no order of a prefix scan (HDFSBackedStateStoreProvider's is a hash set's), and
     * sorting a group of 100 keys cost more than finding and copying it
     * (docs/decisions/074-prefix-scans-from-complete-view.md).
     */
    private java.util.Iterator<byte[][][]> residentEntries(byte[] prefix) {
        if (view == null || !settings.readsLikeTheWorker(true) || ended) {
            return null;
        }
        long now = settings.ttlMs == 0 ? Long.MIN_VALUE : batchTimestampMs; // MIN_VALUE: nothing expires
        java.util.Iterator<byte[][][]> entries;
        if (prefix.length == 0) {
            entries = view.entriesIfComplete(version, settings.iteratorChunkEntries, now);
        } else {
            byte[][][] held = view.withPrefixIfComplete(version, prefix, now);
            entries = held == null ? null : java.util.Collections.singletonList(held).iterator();
        }
        if (entries == null) {
            return null;
        }
        metrics.residentScans.incrementAndGet();
        if (direct || written.isEmpty()) {
            return entries;
        }
        // the overlay: this transaction's writes, taken now (as the worker's iterator would)
        java.util.List<byte[]> ownKeys = new java.util.ArrayList<>();
        java.util.List<byte[]> ownValues = new java.util.ArrayList<>();
        java.util.Set<KeyBytes> own = new java.util.HashSet<>(written.keySet());
        for (Map.Entry<KeyBytes, byte[]> w : written.entrySet()) {
            if (w.getValue() != TOMBSTONE && startsWith(w.getKey().bytes, prefix)) {
                ownKeys.add(w.getKey().bytes);
                ownValues.add(w.getValue());
            }
        }
        return new java.util.Iterator<byte[][][]>() {
            private boolean ownDone;

            @Override
            public boolean hasNext() {
                return entries.hasNext() || !ownDone;
            }

            @Override
            public byte[][][] next() {
                if (!entries.hasNext()) {
                    ownDone = true;
                    return new byte[][][] {ownKeys.toArray(new byte[0][]), ownValues.toArray(new byte[0][])};
                }
                byte[][][] chunk = entries.next();
                int n = 0;
                for (int i = 0; i < chunk[0].length; i++) {
                    if (!own.contains(new KeyBytes(chunk[0][i]))) { // this transaction's own write follows
                        chunk[0][n] = chunk[0][i];
                        chunk[1][n++] = chunk[1][i];
                    }
                }
                return n == chunk[0].length ? chunk
                        : new byte[][][] {java.util.Arrays.copyOf(chunk[0], n), java.util.Arrays.copyOf(chunk[1], n)};
            }
        };
    }

    private static boolean startsWith(byte[] key, byte[] prefix) {
        return key.length >= prefix.length && java.util.Arrays.equals(key, 0, prefix.length, prefix, 0, prefix.length);
    }

    /** STATS after a flush: {numKeys, memoryUsedBytes}; the worker's metrics go to {@link StoreMetrics}. */
    long[] stats() {
        flush();
        FrameReader r = call(Requests.stats(handle));
        Reply.Stats s = Replies.decode(() -> Reply.stats(r));
        metrics.workerMetrics(s.metrics);
        return new long[] {s.numKeys, s.memoryUsedBytes};
    }

    /** What a COMMIT reply says besides the metrics (which go to the store's metrics). */
    static final class Committed {
        final long numKeys;
        final long fileBytes;
        final long memoryUsedBytes;
        final boolean snapshotWanted;

        Committed(long numKeys, long fileBytes, long memoryUsedBytes, boolean snapshotWanted) {
            this.numKeys = numKeys;
            this.fileBytes = fileBytes;
            this.memoryUsedBytes = memoryUsedBytes;
            this.snapshotWanted = snapshotWanted;
        }
    }

    /** COMMIT as {@code newVersion}, writing the changelog to {@code changelogPath} (empty: no changelog). */
    Committed commit(long newVersion, String changelogPath) {
        dropAhead();
        flush();
        FrameReader r;
        try {
            r = call(Requests.commit(handle, newVersion, changelogPath));
        } finally {
            ended = true; // COMMIT ends the transaction, and a failed one leaves it unusable
            spareBatch = null;
        }
        Reply.Committed c = Replies.decode(() -> Reply.commit(r));
        metrics.workerMetrics(c.metrics);
        return new Committed(c.numKeys, c.fileBytes, c.memoryUsedBytes, c.snapshotWanted);
    }

    /** Write records this transaction made (puts and removes). */
    long records() {
        return records;
    }

    /** ABORT, dropping unsent writes; idempotent. */
    void abort() {
        dropAhead();
        batch = null;
        spareBatch = null;
        batchCount = 0;
        unsentAccesses = 0;
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

    /** Forgets a read-ahead in flight (the connection reads its answer before the next one). */
    private void dropAhead() {
        ahead = null;
        aheadKeys = null;
        writtenWhileAhead = null;
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
            batch = Requests.writeBatch(w, handle);
        }
        return batch;
    }
}
