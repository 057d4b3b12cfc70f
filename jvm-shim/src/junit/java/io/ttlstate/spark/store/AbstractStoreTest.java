package io.ttlstate.spark.store;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.junit.jupiter.api.Test;

class AbstractStoreTest {
    @Test
    void theSpelledOutDefaultColumnFamilyIsSparks() {
        assertEquals(StateStore.DEFAULT_COL_FAMILY_NAME(), AbstractStore.DEFAULT_CF);
    }
}
