package io.ttlstate.spark.protocol;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Decodes every request body of {@code tests/vectors/frames.tsv} with the Java decoder and
 * compares the canonical JSON with the one the Python reference decoder produced
 * ({@code tests/vectors/make_vectors.py:canonical}). Exits 1 listing any mismatch.
 *
 * <p>Usage: {@code java -cp ttlstate-shim.jar io.ttlstate.spark.protocol.VectorCheck frames.tsv}
 */
public final class VectorCheck {
    private VectorCheck() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: VectorCheck <frames.tsv>");
            System.exit(2);
        }
        int passed = 0;
        List<String> failures = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.UTF_8)) {
            if (line.isEmpty()) {
                continue;
            }
            String[] cols = line.split("\t", -1);
            if (cols.length != 3) {
                failures.add("malformed vector line: " + line);
                continue;
            }
            String actual = canonical(unhex(cols[1]));
            if (actual.equals(cols[2])) {
                passed++;
            } else {
                failures.add(cols[0] + ": expected " + cols[2] + " got " + actual);
            }
        }
        for (String f : failures) {
            System.out.println("FAIL " + f);
        }
        System.out.println(passed + " passed, " + failures.size() + " failed");
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    /** The canonical JSON of a request body, or {@code ERROR} if the decoder refuses it. */
    public static String canonical(byte[] body) {
        try {
            return toJson(decodeRequest(body));
        } catch (ProtocolException e) {
            return "ERROR";
        }
    }

    /** Decodes a whole request into op name, handle and fields, like {@code protocol.decode_request}. */
    static Map<String, Object> decodeRequest(byte[] body) throws ProtocolException {
        FrameReader r = new FrameReader(body);
        int op = r.u8();
        long handle = r.u32();
        if (Op.name(op) == null) {
            throw new ProtocolException(String.format("unknown op code 0x%02x", op));
        }
        Map<String, Object> f = new TreeMap<>();
        f.put("op", Op.name(op));
        f.put("handle", handle);
        switch (op) {
            case Op.HELLO:
                f.put("token", hex(r.bytes()));
                f.put("version", (long) r.u16());
                break;
            case Op.OPEN: {
                f.put("storeId", r.str());
                f.put("localDir", r.str());
                f.put("operatorId", r.i64());
                f.put("storeName", r.str());
                List<Object> conf = new ArrayList<>();
                for (int i = 0, n = r.count(8); i < n; i++) {
                    conf.add(List.of(r.str(), r.str()));
                }
                f.put("conf", conf);
                break;
            }
            case Op.LOAD: {
                f.put("version", r.i64());
                f.put("batchTimestampMs", r.i64());
                f.put("manifestVersion", r.i64());
                f.put("manifestPath", r.str());
                List<Object> ssts = new ArrayList<>();
                for (int i = 0, n = r.count(8); i < n; i++) {
                    ssts.add(List.of(r.str(), r.str()));
                }
                f.put("ssts", ssts);
                List<Object> changelogs = new ArrayList<>();
                for (int i = 0, n = r.count(12); i < n; i++) {
                    changelogs.add(List.of(r.i64(), r.str()));
                }
                f.put("changelogs", changelogs);
                break;
            }
            case Op.BEGIN: {
                f.put("version", r.i64());
                int mode = r.u8();
                if (mode != Op.BEGIN_WRITE && mode != Op.BEGIN_READ_ONLY && mode != Op.BEGIN_WRITE_NO_CHANGELOG) {
                    throw new ProtocolException("unknown transaction mode " + mode);
                }
                f.put("mode", (long) mode);
                f.put("batchTimestampMs", r.i64());
                break;
            }
            case Op.WRITE_BATCH: {
                List<Object> records = new ArrayList<>();
                for (int i = 0, n = r.count(5); i < n; i++) {
                    int kind = r.u8();
                    List<Object> rec = new ArrayList<>();
                    rec.add((long) kind);
                    if (kind == Op.RECORD_PUT || kind == Op.RECORD_PUT_NEW || kind == Op.RECORD_PUT_OVER) {
                        rec.add(hex(r.bytes()));
                        rec.add(hex(r.bytes()));
                    } else if (kind == Op.RECORD_REMOVE || kind == Op.RECORD_REMOVE_PRESENT) {
                        rec.add(hex(r.bytes()));
                        rec.add(null);
                    } else if (kind == Op.RECORD_ACCESS) {
                        rec.add(null);
                        rec.add(r.u32());
                    } else {
                        throw new ProtocolException("unknown write record kind " + kind);
                    }
                    records.add(rec);
                }
                f.put("records", records);
                break;
            }
            case Op.GET:
                f.put("key", hex(r.bytes()));
                break;
            case Op.MULTI_GET: {
                List<Object> keys = new ArrayList<>();
                for (int i = 0, n = r.count(4); i < n; i++) {
                    keys.add(hex(r.bytes()));
                }
                f.put("keys", keys);
                break;
            }
            case Op.ITER_OPEN: {
                f.put("prefix", hex(r.bytes()));
                f.put("maxEntries", r.u32());
                int mode = r.u8();
                if (mode != Op.ITER_PAIRS && mode != Op.ITER_PAIRS_WITH_EXPIRY) {
                    throw new ProtocolException("unknown iterator mode " + mode);
                }
                f.put("mode", (long) mode);
                break;
            }
            case Op.ITER_NEXT:
                f.put("maxEntries", r.u32());
                break;
            case Op.COMMIT:
                f.put("newVersion", r.i64());
                f.put("changelogPath", r.str());
                break;
            case Op.SNAPSHOT:
                f.put("dir", r.str());
                break;
            case Op.MANIFEST_FILES:
                f.put("path", r.str());
                f.put("version", r.i64());
                break;
            case Op.READ_CHANGELOG:
                f.put("path", r.str());
                f.put("version", r.i64());
                f.put("fromRecord", r.i64());
                f.put("maxRecords", r.u32());
                break;
            case Op.CLOSE:
                f.put("deleteFiles", r.bool());
                break;
            default:
                break; // ITER_CLOSE, STATS, ABORT, PING, MAINTAIN: empty payload
        }
        r.end();
        return f;
    }

    /** JSON like Python's {@code json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=True)}. */
    static String toJson(Object v) {
        StringBuilder sb = new StringBuilder();
        write(sb, v);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean || v instanceof Long || v instanceof Integer) {
            sb.append(v);
        } else if (v instanceof String) {
            quote(sb, (String) v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : new TreeMap<>((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                quote(sb, (String) e.getKey());
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof List) {
            sb.append('[');
            boolean first = true;
            for (Object o : (List<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else {
            throw new IllegalArgumentException("not JSON-able: " + v.getClass());
        }
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if (c < 0x20 || c > 0x7E) {
                        sb.append(String.format("\\u%04x", (int) c)); // UTF-16 units, like Python
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 0xF, 16)).append(Character.forDigit(x & 0xF, 16));
        }
        return sb.toString();
    }

    static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }
}
