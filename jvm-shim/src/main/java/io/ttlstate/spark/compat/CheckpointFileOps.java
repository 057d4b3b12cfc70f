package io.ttlstate.spark.compat;

import java.io.IOException;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * Spark's {@code CheckpointFileManager} for one directory, the calls the shim makes on it. Spark
 * 4.1 moved it from {@code org.apache.spark.sql.execution.streaming} to
 * {@code ...streaming.checkpointing}; the methods are the same on every line, so this finds the
 * class where the line has it and calls it through method handles.
 */
public final class CheckpointFileOps {
    private static final String NEW = "org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager";
    private static final String OLD = "org.apache.spark.sql.execution.streaming.CheckpointFileManager";
    private static final MethodHandle CREATE;
    private static final MethodHandle EXISTS;
    private static final MethodHandle LIST;
    private static final MethodHandle MKDIRS;
    private static final MethodHandle CREATE_ATOMIC;
    private static final MethodHandle CANCEL;
    private static final MethodHandle OPEN;
    private static final MethodHandle DELETE;

    static {
        MethodHandles.Lookup l = MethodHandles.publicLookup();
        Class<?> cfm = SparkCompat.firstClass(NEW, OLD);
        Class<?> cancellable = SparkCompat.firstClass(NEW + "$CancellableFSDataOutputStream",
                OLD + "$CancellableFSDataOutputStream");
        try {
            CREATE = l.findStatic(cfm, "create", MethodType.methodType(cfm, Path.class, Configuration.class));
            EXISTS = l.findVirtual(cfm, "exists", MethodType.methodType(boolean.class, Path.class));
            LIST = l.findVirtual(cfm, "list", MethodType.methodType(FileStatus[].class, Path.class));
            MKDIRS = l.findVirtual(cfm, "mkdirs", MethodType.methodType(void.class, Path.class));
            CREATE_ATOMIC = l.findVirtual(cfm, "createAtomic",
                    MethodType.methodType(cancellable, Path.class, boolean.class));
            CANCEL = l.findVirtual(cancellable, "cancel", MethodType.methodType(void.class));
            OPEN = l.findVirtual(cfm, "open", MethodType.methodType(FSDataInputStream.class, Path.class));
            DELETE = l.findVirtual(cfm, "delete", MethodType.methodType(void.class, Path.class));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            throw new ExceptionInInitializerError("ttlstate: Spark " + SparkCompat.SPARK_VERSION
                    + "'s CheckpointFileManager lacks a method the shim calls: " + e);
        }
    }

    private final Object fm;

    private CheckpointFileOps(Object fm) {
        this.fm = fm;
    }

    /** {@code CheckpointFileManager.create(dir, hadoopConf)}. */
    public static CheckpointFileOps create(Path dir, Configuration hadoopConf) {
        try {
            return new CheckpointFileOps(CREATE.invoke(dir, hadoopConf));
        } catch (Throwable t) {
            throw SparkCompat.rethrow(t);
        }
    }

    public boolean exists(Path p) throws IOException {
        try {
            return (boolean) EXISTS.invoke(fm, p);
        } catch (Throwable t) {
            throw io(t);
        }
    }

    public FileStatus[] list(Path p) throws IOException {
        try {
            return (FileStatus[]) LIST.invoke(fm, p);
        } catch (Throwable t) {
            throw io(t);
        }
    }

    public void mkdirs(Path p) throws IOException {
        try {
            MKDIRS.invoke(fm, p);
        } catch (Throwable t) {
            throw io(t);
        }
    }

    public FSDataInputStream open(Path p) throws IOException {
        try {
            return (FSDataInputStream) OPEN.invoke(fm, p);
        } catch (Throwable t) {
            throw io(t);
        }
    }

    public void delete(Path p) throws IOException {
        try {
            DELETE.invoke(fm, p);
        } catch (Throwable t) {
            throw io(t);
        }
    }

    /** A stream whose close renames it into place; {@link #cancel} drops it instead. */
    public FSDataOutputStream createAtomic(Path p, boolean overwrite) throws IOException {
        try {
            return (FSDataOutputStream) CREATE_ATOMIC.invoke(fm, p, overwrite);
        } catch (Throwable t) {
            throw io(t);
        }
    }

    /** Cancels a stream of {@link #createAtomic}. */
    public static void cancel(FSDataOutputStream out) throws IOException {
        try {
            CANCEL.invoke(out);
        } catch (Throwable t) {
            throw io(t);
        }
    }

    private static IOException io(Throwable t) {
        if (t instanceof IOException) {
            return (IOException) t;
        }
        throw SparkCompat.rethrow(t);
    }
}
