package io.ttlstate.spark.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;

/**
 * The shared reply vectors (tests/vectors/replies.tsv: name, op, what the JVM knows of its
 * request, body in hex as the worker's own encoders wrote it, the fields they were given): the
 * shim's decoders ({@link FrameReader#status}, {@link Reply}) read those fields back from every
 * body, and refuse every {@code bad-*} one.
 */
class ReplyVectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Stream<String[]> vectors() {
        List<String[]> rows = Vectors.rows("replies.tsv", 30, 5);
        return rows.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("vectors")
    void theShimsDecoderReadsTheVectorsFields(String name, String op, String context, String hex, String fields)
            throws Exception {
        byte[] body = HexFormat.of().parseHex(hex);
        JsonNode ctx = JSON.readTree(context);
        if (name.startsWith("bad-")) {
            assertEquals("ERROR", fields, name);
            assertThrows(ProtocolException.class, () -> decode(op, ctx, body), name + " must be refused");
            return;
        }
        Object decoded = decode(op, ctx, body);
        assertEquals(JSON.readTree(fields), JSON.readTree(JSON.writeValueAsString(decoded)), name);
    }

    @Test
    void theVectorsHoldAReplyOfEveryOpButTheWriteBatchesAndAnError() {
        Set<String> ops = new TreeSet<>();
        Set<String> all = new TreeSet<>();
        for (int op = 1; Op.name(op) != null; op++) {
            if (op != Op.WRITE_BATCH && op != Op.WRITE_STAMPED) { // get no reply
                all.add(Op.name(op));
            }
        }
        boolean error = false;
        for (String[] row : vectors().toArray(String[][]::new)) {
            if (!row[0].startsWith("bad-")) {
                error |= row[3].startsWith("01");
                ops.add(row[1]);
            }
        }
        assertEquals(all, ops);
        assertTrue(error, "an ERROR reply");
    }

    /** The fields of a reply to {@code op} as the shim reads them; a JSON-able tree. */
    private static Object decode(String op, JsonNode ctx, byte[] body) throws ProtocolException {
        FrameReader r = new FrameReader(body);
        if (r.status() == Op.STATUS_ERROR) {
            Reply.Failed e = Reply.error(r);
            return fields("errorClass", e.errorClass, "message", e.message);
        }
        switch (op) {
            case "HELLO": {
                Reply.Hello h = Reply.hello(r);
                return fields("protocolVersion", h.protocolVersion, "workerPid", h.workerPid,
                        "workerIndex", h.workerIndex);
            }
            case "OPEN": {
                Reply.Opened o = Reply.open(r);
                return fields("storeHandle", o.storeHandle, "settings", o.settings);
            }
            case "LOAD":
                return fields("numKeys", Reply.load(r));
            case "BEGIN": {
                Reply.Begun b = Reply.begin(r);
                return fields("txnHandle", b.txnHandle, "direct", b.direct, "stamped", b.stamped, "stamp", b.stamp);
            }
            case "GET": {
                Reply.Answer a = Reply.get(r);
                return fields("value", hex(a.value), "expiresAt", a.expiresAt);
            }
            case "MULTI_GET": {
                List<Object> answers = new ArrayList<>();
                for (Reply.Answer a : Reply.multiGet(r, ctx.get("asked").asInt())) {
                    answers.add(list(hex(a.value), a.expiresAt));
                }
                return fields("answers", answers);
            }
            case "ITER_OPEN": {
                Reply.IterOpened o = Reply.iterOpen(r, withExpiry(ctx));
                return fields("iterHandle", o.iterHandle, "last", o.chunk.last, "entries", entries(o.chunk));
            }
            case "ITER_NEXT": {
                Reply.Chunk c = Reply.chunk(r, withExpiry(ctx));
                return fields("last", c.last, "entries", entries(c));
            }
            case "STATS": {
                Reply.Stats s = Reply.stats(r);
                return fields("numKeys", s.numKeys, "memoryUsedBytes", s.memoryUsedBytes, "metrics", s.metrics);
            }
            case "COMMIT": {
                Reply.Committed c = Reply.commit(r);
                return fields("numKeys", c.numKeys, "fileBytes", c.fileBytes, "memoryUsedBytes",
                        c.memoryUsedBytes, "snapshotWanted", c.snapshotWanted, "changelogName", c.changelogName,
                        "storedFrom", c.storedFrom, "metrics", c.metrics);
            }
            case "SNAPSHOT": {
                Reply.Snapshot s = Reply.snapshot(r);
                List<Object> ssts = new ArrayList<>();
                s.ssts.forEach(x -> ssts.add(list(x.name, x.path, x.size)));
                return fields("version", s.version, "numKeys", s.numKeys, "manifestPath", s.manifestPath,
                        "manifestName", s.manifestName, "ssts", ssts);
            }
            case "MANIFEST_FILES": {
                List<Object> ssts = new ArrayList<>();
                Reply.manifestFiles(r).forEach(x -> ssts.add(list(x.name, x.size)));
                return fields("ssts", ssts);
            }
            case "PLAN":
                return ctx.get("purpose").asInt() == Op.PLAN_RETENTION ? retention(Reply.retention(r)) : plan(Reply.plan(r));
            case "READ_CHANGELOG": {
                Reply.ChangelogRecords c = Reply.readChangelog(r);
                List<Object> records = new ArrayList<>();
                for (int i = 0; i < c.keys.size(); i++) {
                    records.add(list(hex(c.keys.get(i)), hex(c.values.get(i))));
                }
                return fields("records", records, "next", c.next);
            }
            case "ITER_CLOSE":
            case "ABORT":
            case "CLOSE":
            case "PING":
            case "MAINTAIN":
                Reply.empty(r);
                return fields();
            default:
                throw new AssertionError("no decoder for " + op);
        }
    }

    /** The chunk's entries as {@code [key, value]} or {@code [key, value, expiresAt]}. */
    private static List<Object> entries(Reply.Chunk c) {
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < c.keys.length; i++) {
            out.add(c.expiresAt == null ? list(hex(c.keys[i]), hex(c.values[i]))
                    : list(hex(c.keys[i]), hex(c.values[i]), c.expiresAt[i]));
        }
        return out;
    }

    private static Map<String, Object> plan(Reply.Plan p) {
        if (p.outcome == Op.PLAN_MISSING) {
            return fields("outcome", p.outcome, "pattern", p.missingPattern, "message", p.missingMessage);
        }
        if (p.outcome == Op.PLAN_NO_CHANGELOG) {
            return fields("outcome", p.outcome, "version", p.noChangelogVersion);
        }
        List<Object> changelogs = new ArrayList<>();
        for (int i = 0; i < p.changelogs.length; i++) {
            changelogs.add(list(p.changelogs[i], p.changelogVersions[i]));
        }
        List<Object> later = new ArrayList<>();
        for (int i = 0; i < p.later.length; i++) {
            later.add(list(p.later[i], p.laterVersions[i], p.laterManifests[i]));
        }
        return fields("outcome", p.outcome, "id", p.id == null ? "" : p.id, "manifestVersion", p.manifestVersion,
                "manifest", p.manifest, "changelogs", changelogs, "later", later);
    }

    private static Map<String, Object> retention(Reply.Retention p) {
        List<Object> deletable = new ArrayList<>();
        for (int i : p.deletable) {
            deletable.add(i);
        }
        List<Object> manifests = new ArrayList<>();
        for (int i = 0; i < p.retainedManifests.length; i++) {
            manifests.add(list(p.retainedManifests[i], p.retainedManifestVersions[i]));
        }
        return fields("outcome", Op.PLAN_PLANNED, "keepFrom", p.keepFrom, "complete", p.complete,
                "oldestRetainedMs", p.oldestRetainedMs, "deletable", deletable, "retainedManifests", manifests);
    }

    private static boolean withExpiry(JsonNode ctx) {
        return ctx.get("mode").asInt() != Op.ITER_PAIRS;
    }

    private static Map<String, Object> fields(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static List<Object> list(Object... xs) {
        List<Object> out = new ArrayList<>();
        java.util.Collections.addAll(out, xs);
        return out; // nulls allowed (List.of refuses them)
    }

    private static String hex(byte[] b) {
        return b == null ? null : HexFormat.of().formatHex(b);
    }
}
