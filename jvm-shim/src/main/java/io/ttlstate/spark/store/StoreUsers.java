package io.ttlstate.spark.store;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.WeakHashMap;

import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What uses a {@link RemoteStore}: the last write store and read transaction opened on it, the
 * Spark task that opened the last transaction and the iterators that may still need the
 * worker; when the store may close, and ending them when it does. Guarded by the store's
 * monitor (the iterators by their set's), which callers hold unless a method says otherwise.
 */
final class StoreUsers {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteStore.class); // logs as its store

    private final RemoteStore store;
    /** The last write store opened on this store (a writer writes straight into the worker's database). */
    private WriteCore writer;
    /** The transaction of the last read store opened on this store (for {@link RemoteStore#readAheadTxn}). */
    private RemoteTxn readerTxn;
    /** The Spark task that opened the last transaction (null: none, or opened outside a task). */
    private TaskContext txnTask;
    /** Spark unloaded this store while {@link #txnTask} used it: it closes when that task ends. */
    private boolean closeDeferred;
    /** Iterators that may still need the worker; drained into memory before the store is closed. */
    private final Set<ChunkIterator> openIterators = Collections.newSetFromMap(new WeakHashMap<>());

    StoreUsers(RemoteStore store) {
        this.store = store;
    }

    /** The current task is about to begin a transaction: a write store Spark left behind is ended first if it writes. */
    void beginning(boolean readOnly) {
        txnTask = TaskContext.get();
        if (!readOnly && writing()) {
            // a write store Spark left behind (its task died without aborting): end it, so the
            // new one can write; only one transaction at a time writes into the database
            LOG.warn("Aborting the unfinished write store of version {} of {} before opening another",
                    writer.version, store);
            writer.abort();
        }
    }

    void writeOpened(WriteCore s) {
        writer = s;
    }

    void readOpened(RemoteTxn txn) {
        readerTxn = txn;
    }

    void writeEnded(WriteCore s) {
        if (writer == s) {
            writer = null;
        }
    }

    /** Whether a write store has its transaction open (neither committed nor aborted). */
    boolean writing() {
        return writer != null && writer.isUpdating();
    }

    /** Whether a write store or read store has a transaction open on this store. */
    private boolean inTransaction() {
        return writing() || (readerTxn != null && !readerTxn.isEnded());
    }

    /** The transaction of the write store open on the store, or null. */
    RemoteTxn writerTxn() {
        return writer == null || writer.txn.isEnded() ? null : writer.txn;
    }

    /** The transaction of the last read store if still open, or null. */
    RemoteTxn readerTxn() {
        return readerTxn == null || readerTxn.isEnded() ? null : readerTxn;
    }

    /** An iterator a transaction of the store created (any thread). */
    void track(ChunkIterator it) {
        synchronized (openIterators) {
            openIterators.add(it);
        }
    }

    /**
     * Runs {@code closeNow} at once, unless another task with a transaction open still runs:
     * then when that task ends (docs/decisions/089-unload-during-task.md). Takes the store's
     * monitor itself; the caller holds it not.
     */
    void closeWhenUnused(Runnable closeNow) {
        TaskContext task;
        synchronized (store) {
            task = inTransaction() ? txnTask : null;
        }
        if (task == null || task == TaskContext.get() || task.isCompleted()) {
            closeNow.run();
            return;
        }
        synchronized (store) {
            if (closeDeferred) {
                return;
            }
            closeDeferred = true;
        }
        LOG.info("{} is unloaded while task {} (stage {}, partition {}) uses it: close deferred until the task ends",
                store, task.taskAttemptId(), task.stageId(), task.partitionId());
        // runs at once if the task has completed meanwhile
        task.addTaskCompletionListener((TaskCompletionListener) ctx -> closeNow.run());
    }

    /** The store closes (or closed already): no close waits any longer. */
    void closing() {
        closeDeferred = false;
        txnTask = null; // no reference to a finished task's context
    }

    /** Ends what the store's tasks left open: the write and read transactions, and drains the iterators. */
    void endAll() {
        if (writing()) {
            writer.abort(); // its task ended without committing (Spark aborts it later: a no-op then)
        }
        if (readerTxn != null && !readerTxn.isEnded()) {
            try {
                readerTxn.abort(); // its task ended without releasing it
            } catch (RuntimeException e) {
                LOG.debug("Ending the open read transaction of {} failed (the store closes anyway)", store, e);
            }
        }
        List<ChunkIterator> iterators;
        synchronized (openIterators) {
            iterators = new ArrayList<>(openIterators);
            openIterators.clear();
        }
        for (ChunkIterator it : iterators) {
            try {
                it.drain();
            } catch (RuntimeException e) {
                LOG.debug("Draining an open iterator of {} failed", store, e);
            }
        }
    }
}
