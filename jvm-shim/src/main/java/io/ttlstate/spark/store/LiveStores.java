package io.ttlstate.spark.store;

import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.sql.execution.streaming.state.StateStoreId;

/**
 * The stores started in this JVM, by store id: how a read-ahead finds the store whose reads it
 * serves ({@link JoinPrefetch}: a join's values store from its counts store;
 * {@link RestoreReadAhead}, {@link JoinInputReadAhead}: an operator's stores from the plan's
 * operator and partition).
 */
final class LiveStores {
    private static final ConcurrentHashMap<StateStoreId, RemoteStore> LIVE = new ConcurrentHashMap<>();

    private LiveStores() {
    }

    static void add(RemoteStore p) {
        LIVE.put(p.stateStoreId(), p);
    }

    static void remove(RemoteStore p) {
        StateStoreId id = p.stateStoreId();
        if (id != null) {
            LIVE.remove(id, p);
        }
    }

    /** The store of {@code id} started in this JVM, or null. */
    static RemoteStore get(StateStoreId id) {
        return LIVE.get(id);
    }
}
