package io.ttlstate.spark.checkpoint;

import java.util.List;

/** Records of a changelog as READ_CHANGELOG returns them: keys, values (null: a remove), next index. */
public final class ChangelogChunk {
    public final List<byte[]> keys;
    /** Null entries are removes. */
    public final List<byte[]> values;
    /** The index of the next record to ask for; -1 after the last. */
    public final long next;

    ChangelogChunk(List<byte[]> keys, List<byte[]> values, long next) {
        this.keys = keys;
        this.values = values;
        this.next = next;
    }
}
