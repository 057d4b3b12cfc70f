package io.ttlstate.spark.checkpoint;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.fs.FileStatus;

/**
 * A manifest or changelog of a store's checkpoint, named as docs/PROTOCOL.md ("Checkpoint
 * layout of a store") says: format v1 {@code <v>.changelog}, {@code <v>.manifest}; format v2
 * {@code <v>_<id>_<baseId>.changelog}, {@code <v>_<id>.manifest}.
 */
final class StateFileName {
    enum Kind {
        CHANGELOG("changelog"), MANIFEST("manifest");

        final String suffix;

        Kind(String suffix) {
            this.suffix = suffix;
        }
    }

    /** {@code baseId} of a v2 changelog whose base is the empty version 0. */
    static final String EMPTY_BASE_ID = "0";
    /** A store's SSTs: {@code <store dir>/sst/<number>-<16 hex>.sst}, shared by its manifests. */
    static final String SST_DIR = "sst";

    private static final Pattern V1 = Pattern.compile("(\\d+)\\.(changelog|manifest)");
    private static final Pattern V2_CHANGELOG = Pattern.compile("(\\d+)_([^_./]+)_([^_./]+)\\.changelog");
    private static final Pattern V2_MANIFEST = Pattern.compile("(\\d+)_([^_./]+)\\.manifest");

    final long version;
    final Kind kind;
    /** The version's unique checkpoint id (format v2), else null. */
    final String id;
    /** The id of version {@code version - 1} a v2 changelog was built on, else null. */
    final String baseId;
    final FileStatus status;

    private StateFileName(long version, Kind kind, String id, String baseId, FileStatus status) {
        this.version = version;
        this.kind = kind;
        this.id = id;
        this.baseId = baseId;
        this.status = status;
    }

    /** The state file {@code status} names, or null if it is no state file. */
    static StateFileName parse(FileStatus status) {
        String name = status.getPath().getName();
        Matcher m = V1.matcher(name);
        if (m.matches()) {
            Kind kind = "manifest".equals(m.group(2)) ? Kind.MANIFEST : Kind.CHANGELOG;
            return new StateFileName(Long.parseLong(m.group(1)), kind, null, null, status);
        }
        m = V2_CHANGELOG.matcher(name);
        if (m.matches()) {
            return new StateFileName(Long.parseLong(m.group(1)), Kind.CHANGELOG, m.group(2), m.group(3), status);
        }
        m = V2_MANIFEST.matcher(name);
        if (m.matches()) {
            return new StateFileName(Long.parseLong(m.group(1)), Kind.MANIFEST, m.group(2), null, status);
        }
        return null;
    }

    /**
     * The file name of a state file; {@code id} null means format v1. A v2 changelog's
     * {@code baseId} is the id of {@code version - 1} ({@link #EMPTY_BASE_ID} for version 0).
     */
    static String name(long version, Kind kind, String id, String baseId) {
        if (id == null) {
            return version + "." + kind.suffix;
        }
        if (kind == Kind.MANIFEST) {
            return version + "_" + id + "." + kind.suffix;
        }
        return version + "_" + id + "_" + (baseId == null ? EMPTY_BASE_ID : baseId) + "." + kind.suffix;
    }

    boolean isManifest() {
        return kind == Kind.MANIFEST;
    }

    String fileName() {
        return status.getPath().getName();
    }

    @Override
    public String toString() {
        return status.getPath().toString();
    }

    /**
     * Whether this file was written after {@code other}: the later modification time, on equal
     * times the greater name, whatever a listing's order ({@code ttlstate.layout.newest_v2}).
     */
    boolean newerThan(StateFileName other) {
        long mine = status.getModificationTime();
        long theirs = other.status.getModificationTime();
        return mine != theirs ? mine > theirs : fileName().compareTo(other.fileName()) > 0;
    }
}
