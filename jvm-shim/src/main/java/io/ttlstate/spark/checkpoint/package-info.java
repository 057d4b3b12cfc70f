/**
 * A store's checkpoint: listing, naming and moving its files, load plans, retention, the
 * local file cache, the transfer threads and the worker requests that load and snapshot.
 */
package io.ttlstate.spark.checkpoint;
