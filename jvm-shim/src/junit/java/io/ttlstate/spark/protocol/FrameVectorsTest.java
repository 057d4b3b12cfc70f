package io.ttlstate.spark.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;

/**
 * The shared request vectors (tests/vectors/frames.tsv: name, body in hex, the fields Python's
 * decoder reads from it, which reads each payload as the worker does): the shim's own encoders,
 * {@link Requests} and {@link Records}, given those fields, write the same bytes. The
 * {@code bad-*} lines are Python's decoder's to refuse; the JVM never sends PING.
 */
class FrameVectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Requests the JVM never sends. */
    private static final Set<String> NOT_SENT = Set.of("PING");

    static Stream<String[]> vectors() {
        List<String[]> rows = Vectors.rows("frames.tsv", 30, 3);
        return rows.stream().filter(r -> !r[0].startsWith("bad-"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("vectors")
    void theShimsEncoderWritesTheVectorsBytes(String name, String hex, String fields) throws Exception {
        JsonNode f = JSON.readTree(fields);
        if (NOT_SENT.contains(f.get("op").asText())) {
            return;
        }
        FrameWriter w = encode(f);
        assertEquals(hex, HexFormat.of().formatHex(w.body()), name);
        byte[] frame = Arrays.copyOf(w.frame(), w.frameLength());
        assertEquals(w.size(), new FrameReader(frame, 0, 4).i32(), "length prefix of " + name);
        assertEquals(hex, HexFormat.of().formatHex(frame, 4, frame.length), "frame of " + name);
    }

    @Test
    void theVectorsHoldEveryOpAndEveryRecordKind() throws Exception {
        Set<String> ops = new TreeSet<>();
        Set<Integer> kinds = new TreeSet<>();
        for (String[] row : vectors().collect(Collectors.toList())) {
            JsonNode f = JSON.readTree(row[2]);
            ops.add(f.get("op").asText());
            if (f.has("records")) {
                f.get("records").forEach(rec -> kinds.add(rec.get(0).asInt()));
            }
        }
        Set<String> all = new TreeSet<>();
        for (int op = 1; Op.name(op) != null; op++) {
            all.add(Op.name(op));
        }
        assertEquals(all, ops);
        assertEquals(Set.of(1, 2, 3, 4, 5, 6, 7, 8), kinds);
    }

    /** The request of {@code f} (a vector's fields), built by the encoder the shim sends it with. */
    private static FrameWriter encode(JsonNode f) {
        long h = f.get("handle").asLong();
        switch (f.get("op").asText()) {
            case "HELLO":
                assertEquals(Op.PROTOCOL_VERSION, f.get("version").asInt(), "HELLO's protocol version");
                return Requests.hello(bytes(f.get("token")));
            case "OPEN": {
                assertEquals(0, h);
                Map<String, String> conf = new LinkedHashMap<>();
                f.get("conf").forEach(kv -> conf.put(kv.get(0).asText(), kv.get(1).asText()));
                return Requests.open(f.get("storeId").asText(), f.get("localDir").asText(),
                        f.get("operatorId").asLong(), f.get("storeName").asText(), conf);
            }
            case "LOAD": {
                Map<String, String> ssts = new LinkedHashMap<>();
                f.get("ssts").forEach(s -> ssts.put(s.get(0).asText(), s.get(1).asText()));
                Map<Long, String> changelogs = new LinkedHashMap<>();
                f.get("changelogs").forEach(c -> changelogs.put(c.get(0).asLong(), c.get(1).asText()));
                return Requests.load(h, f.get("version").asLong(), f.get("batchTimestampMs").asLong(),
                        f.get("manifestVersion").asLong(), f.get("manifestPath").asText(), ssts, changelogs);
            }
            case "BEGIN":
                return Requests.begin(h, f.get("version").asLong(), f.get("mode").asInt(),
                        f.get("batchTimestampMs").asLong());
            case "WRITE_BATCH": {
                FrameWriter w = Requests.writeBatch(new FrameWriter(), h);
                f.get("records").forEach(rec -> record(w, rec));
                return Requests.writeBatchCount(w, f.get("records").size());
            }
            case "WRITE_STAMPED": {
                long stamp = f.get("stamp").asLong();
                FrameWriter w = Requests.writeStamped(new FrameWriter(), h, stamp);
                f.get("records").forEach(rec -> stampedRecord(w, rec, stamp));
                LiveExpiries live = new LiveExpiries();
                f.get("replaced").forEach(pair -> {
                    for (long i = 0; i < pair.get(1).asLong(); i++) {
                        live.add(pair.get(0).asLong());
                    }
                });
                java.util.List<byte[]> expired = new java.util.ArrayList<>();
                f.get("expired").forEach(key -> expired.add(bytes(key)));
                return Requests.writeStampedEnd(w, f.get("records").size(), (int) f.get("accesses").asLong(), live,
                        expired);
            }
            case "GET":
                return Requests.get(h, bytes(f.get("key")));
            case "MULTI_GET": {
                byte[][] keys = new byte[f.get("keys").size()][];
                for (int i = 0; i < keys.length; i++) {
                    keys[i] = bytes(f.get("keys").get(i));
                }
                return Requests.multiGet(h, keys, 0, keys.length);
            }
            case "ITER_OPEN":
                return Requests.iterOpen(h, bytes(f.get("prefix")), f.get("maxEntries").asLong(), f.get("mode").asInt());
            case "ITER_NEXT":
                return Requests.iterNext(h, f.get("maxEntries").asLong());
            case "ITER_CLOSE":
                return Requests.iterClose(h);
            case "STATS":
                return Requests.stats(h);
            case "COMMIT":
                return Requests.commit(h, f.get("newVersion").asLong(), f.get("changelogPath").asText(),
                        opt(f.get("id").asText()), opt(f.get("baseId").asText()));
            case "ABORT":
                return Requests.abort(h);
            case "SNAPSHOT":
                return Requests.snapshot(h, f.get("dir").asText(), opt(f.get("id").asText()));
            case "CLOSE":
                return Requests.close(h, f.get("deleteFiles").asBoolean());
            case "MAINTAIN":
                return Requests.maintain(h);
            case "MANIFEST_FILES":
                assertEquals(0, h);
                return Requests.manifestFiles(f.get("path").asText(), f.get("version").asLong());
            case "PLAN": {
                assertEquals(0, h);
                List<String> names = new ArrayList<>();
                JsonNode files = f.get("files");
                long[] mtimes = new long[files.size()];
                for (int i = 0; i < files.size(); i++) {
                    names.add(files.get(i).get(0).asText());
                    mtimes[i] = files.get(i).get(1).asLong();
                }
                String id = f.get("id").asText();
                return Requests.plan(f.get("purpose").asInt(), f.get("v2").asBoolean(), f.get("version").asLong(),
                        id.isEmpty() ? null : id, f.get("from").asLong(), f.get("minVersionsToRetain").asInt(),
                        f.get("minVersionsToDelete").asLong(), f.get("maxVersionsToDelete").asInt(), names, mtimes);
            }
            case "READ_CHANGELOG":
                assertEquals(0, h);
                return Requests.readChangelog(f.get("path").asText(), f.get("version").asLong(),
                        f.get("fromRecord").asLong(), f.get("maxRecords").asLong());
            default:
                throw new AssertionError("no encoder for " + f.get("op"));
        }
    }

    /** A record {@code [kind, key, value-or-count, (expiresAt)]}, appended by the encoder of its kind. */
    private static void record(FrameWriter w, JsonNode rec) {
        int kind = rec.get(0).asInt();
        switch (kind) {
            case 1: Records.put(w, bytes(rec.get(1)), bytes(rec.get(2))); break;
            case 2: Records.remove(w, bytes(rec.get(1))); break;
            case 3: Records.access(w, (int) rec.get(2).asLong()); break;
            case 4: Records.putNew(w, bytes(rec.get(1)), bytes(rec.get(2))); break;
            case 5: Records.putOver(w, bytes(rec.get(1)), bytes(rec.get(2))); break;
            case 6: Records.removePresent(w, bytes(rec.get(1))); break;
            case 7: Records.putOverLive(w, bytes(rec.get(1)), bytes(rec.get(2)), rec.get(3).asLong()); break;
            case 8: Records.removeLive(w, bytes(rec.get(1)), rec.get(3).asLong()); break;
            default: throw new AssertionError("record kind " + kind);
        }
    }

    /** A record of a WRITE_STAMPED frame: a put's value as the JVM has it, the stamp then put before it. */
    private static void stampedRecord(FrameWriter w, JsonNode rec, long stamp) {
        int kind = rec.get(0).asInt();
        if (kind == Op.RECORD_REMOVE) {
            Records.remove(w, bytes(rec.get(1)));
        } else if (kind == Op.RECORD_REMOVE_PRESENT) {
            Records.removePresent(w, bytes(rec.get(1)));
        } else {
            byte[] stored = bytes(rec.get(2));
            assertEquals(stamp, java.nio.ByteBuffer.wrap(stored).getLong(), "a put's stored value begins with the stamp");
            Records.stampedPut(w, kind, bytes(rec.get(1)), stamp,
                    java.util.Arrays.copyOfRange(stored, Op.STAMP_BYTES, stored.length));
        }
    }

    /** An optional string field as the JVM holds it: "" on the wire is null. */
    private static String opt(String s) {
        return s.isEmpty() ? null : s;
    }

    private static byte[] bytes(JsonNode hex) {
        return HexFormat.of().parseHex(hex.asText());
    }
}
