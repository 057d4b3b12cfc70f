package io.ttlstate.spark.cache;

import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * The entries of a {@link SlabCache#snapshot}, copied out a chunk at a time as {keys, values}.
 * It pins the slabs it reads until it has handed out its last entry: slabs are immutable once
 * written, so the cache may change meanwhile (docs/decisions/048-slab-cache.md).
 */
final class SlabSnapshot implements Iterator<byte[][][]> {
    private final Slab[] slabs;
    private boolean unpinned;
    private final int firstId;
    private final int[] ids;
    private final int[] offs;
    private int next;
    private int chunk = 1024;

    SlabSnapshot(Slab[] slabs, int firstId, int[] ids, int[] offs) {
        this.slabs = slabs;
        this.firstId = firstId;
        this.ids = ids;
        this.offs = offs;
    }

    /** Entries per chunk handed out by {@link #next}. */
    SlabSnapshot chunkEntries(int n) {
        chunk = Math.max(1, n);
        return this;
    }

    @Override
    public boolean hasNext() {
        if (next < ids.length) {
            return true;
        }
        unpinAll();
        return false;
    }

    private void unpinAll() {
        if (!unpinned) {
            unpinned = true;
            for (Slab s : slabs) {
                s.unpin();
            }
        }
    }

    @Override
    public byte[][][] next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        int n = Math.min(chunk, ids.length - next);
        byte[][] keys = new byte[n][];
        byte[][] values = new byte[n][];
        for (int j = 0; j < n; j++, next++) {
            long at = slabs[ids[next] - firstId].address + offs[next];
            keys[j] = Slab.keyAt(at);
            values[j] = Slab.valueAt(at);
        }
        if (next == ids.length) {
            unpinAll();
        }
        return new byte[][][] {keys, values};
    }
}
