package io.ttlstate.spark.store;

import java.util.Iterator;

import io.ttlstate.spark.StateReadAheadExec;
import io.ttlstate.spark.StateReadAheadSource;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;

/**
 * What {@code StateReadAheadExec} runs on each partition (found by name from the Scala side):
 * its rows, a block at a time, with the state they will read asked for first, for an
 * aggregation's restore ({@link RestoreReadAhead}) or one side of a stream-stream join
 * ({@link JoinInputReadAhead}).
 */
public final class ReadAheads implements StateReadAheadSource {
    @Override
    public Iterator<InternalRow> wrap(Iterator<InternalRow> rows, UnsafeProjection keyOf, String checkpointLocation,
                                      long operatorId, int partition, String reader) {
        ReadAheadBlocks.Reader r = StateReadAheadExec.Aggregation().equals(reader)
                ? new RestoreReadAhead(checkpointLocation, operatorId, partition)
                : new JoinInputReadAhead(checkpointLocation, operatorId, partition, reader);
        return new ReadAheadBlocks(rows, keyOf, r);
    }
}
