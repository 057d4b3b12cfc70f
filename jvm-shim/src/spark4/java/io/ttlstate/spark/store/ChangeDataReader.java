package io.ttlstate.spark.store;

import java.util.List;

import io.ttlstate.spark.checkpoint.ChangelogChunk;
import io.ttlstate.spark.checkpoint.StoreCheckpoint;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.RecordType$;
import org.apache.spark.util.NextIterator;
import scala.Enumeration;
import scala.Tuple4;

/**
 * Spark's change feed of a range of versions ({@code readChangeFeed}): every record of their
 * changelogs in order, as {@code (PUT_RECORD or DELETE_RECORD, key, value or null, batchId)},
 * the batch id being the version minus one. The worker reads the files (READ_CHANGELOG, the
 * format is Python's); this side turns the bytes into rows, a chunk at a time.
 */
public final class ChangeDataReader extends NextIterator<Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object>> {
    private final RemoteStore store;
    private final List<StoreCheckpoint.LocalChangelog> changelogs;
    private final KeyCodec codec;
    private final int numValueFields;
    private final int chunkRecords;

    private int file;
    private ChangelogChunk chunk;
    private int pos;

    /** The change feed of versions {@code from} to {@code (to, toId)} of {@code store}. */
    public ChangeDataReader(RemoteStore store, long from, long to, String toId) {
        this.store = store;
        this.changelogs = store.changelogs(from, to, toId);
        this.codec = store.keyCodec();
        this.numValueFields = store.numValueFields();
        this.chunkRecords = Math.max(1, store.chunkEntries());
    }

    @Override
    public Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object> getNext() {
        while (chunk == null || pos >= chunk.keys.size()) {
            if (chunk != null && chunk.next >= 0) {
                chunk = store.readChangelog(changelogs.get(file), chunk.next, chunkRecords);
            } else {
                if (chunk != null) {
                    file++;
                }
                if (file >= changelogs.size()) {
                    finished_$eq(true);
                    return null;
                }
                chunk = store.readChangelog(changelogs.get(file), 0, chunkRecords);
            }
            pos = 0;
        }
        byte[] k = chunk.keys.get(pos);
        byte[] v = chunk.values.get(pos);
        pos++;
        UnsafeRow key = codec.decodeKey(k, codec.newKeyRow());
        UnsafeRow value = null;
        if (v != null) {
            value = new UnsafeRow(numValueFields);
            value.pointTo(v, v.length);
        }
        Enumeration.Value type = v == null ? RecordType$.MODULE$.DELETE_RECORD() : RecordType$.MODULE$.PUT_RECORD();
        return new Tuple4<>(type, key, value, changelogs.get(file).version - 1);
    }

    @Override
    public void close() {
        chunk = null;
        file = changelogs.size();
    }
}
