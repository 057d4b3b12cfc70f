package io.ttlstate.spark.protocol;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Decodes a whole request body with {@link FrameReader} into the canonical JSON of
 * {@code tests/vectors/make_vectors.py:canonical} (Python's {@code protocol.decode_request}),
 * and writes every field it reads again with a {@link FrameWriter}, so that a test can check
 * the writer against the same vectors.
 */
final class RequestJson {
    private final FrameReader r;
    private final FrameWriter echo;

    private RequestJson(byte[] body, FrameWriter echo) {
        this.r = new FrameReader(body);
        this.echo = echo.reset();
    }

    /** The canonical JSON of {@code body}, or {@code ERROR} if the decoder refuses it; its fields rewritten into {@code echo}. */
    static String canonical(byte[] body, FrameWriter echo) {
        try {
            return toJson(new RequestJson(body, echo).decode());
        } catch (ProtocolException e) {
            return "ERROR";
        }
    }

    private int u8() throws ProtocolException {
        int v = r.u8();
        echo.u8(v);
        return v;
    }

    private long u16() throws ProtocolException {
        int v = r.u16();
        echo.u16(v);
        return v;
    }

    private long u32() throws ProtocolException {
        long v = r.u32();
        echo.u32(v);
        return v;
    }

    private long i64() throws ProtocolException {
        long v = r.i64();
        echo.i64(v);
        return v;
    }

    private boolean bool() throws ProtocolException {
        boolean v = r.bool();
        echo.bool(v);
        return v;
    }

    private String bytes() throws ProtocolException {
        byte[] v = r.bytes();
        echo.bytes(v);
        return hex(v);
    }

    private String str() throws ProtocolException {
        String v = r.str();
        echo.str(v);
        return v;
    }

    private int count(int minItemSize) throws ProtocolException {
        int n = r.count(minItemSize);
        echo.u32(n);
        return n;
    }

    private Map<String, Object> decode() throws ProtocolException {
        int op = u8();
        long handle = u32();
        if (Op.name(op) == null) {
            throw new ProtocolException(String.format("unknown op code 0x%02x", op));
        }
        Map<String, Object> f = new TreeMap<>();
        f.put("op", Op.name(op));
        f.put("handle", handle);
        switch (op) {
            case Op.HELLO:
                f.put("token", bytes());
                f.put("version", u16());
                break;
            case Op.OPEN: {
                f.put("storeId", str());
                f.put("localDir", str());
                f.put("operatorId", i64());
                f.put("storeName", str());
                List<Object> conf = new ArrayList<>();
                for (int i = 0, n = count(8); i < n; i++) {
                    conf.add(List.of(str(), str()));
                }
                f.put("conf", conf);
                break;
            }
            case Op.LOAD: {
                f.put("version", i64());
                f.put("batchTimestampMs", i64());
                f.put("manifestVersion", i64());
                f.put("manifestPath", str());
                List<Object> ssts = new ArrayList<>();
                for (int i = 0, n = count(8); i < n; i++) {
                    ssts.add(List.of(str(), str()));
                }
                f.put("ssts", ssts);
                List<Object> changelogs = new ArrayList<>();
                for (int i = 0, n = count(12); i < n; i++) {
                    changelogs.add(List.of(i64(), str()));
                }
                f.put("changelogs", changelogs);
                break;
            }
            case Op.BEGIN: {
                f.put("version", i64());
                int mode = u8();
                if (mode != Op.BEGIN_WRITE && mode != Op.BEGIN_READ_ONLY && mode != Op.BEGIN_WRITE_NO_CHANGELOG) {
                    throw new ProtocolException("unknown transaction mode " + mode);
                }
                f.put("mode", (long) mode);
                f.put("batchTimestampMs", i64());
                break;
            }
            case Op.WRITE_BATCH: {
                List<Object> records = new ArrayList<>();
                for (int i = 0, n = count(5); i < n; i++) {
                    int kind = u8();
                    List<Object> rec = new ArrayList<>();
                    rec.add((long) kind);
                    if (kind == Op.RECORD_PUT || kind == Op.RECORD_PUT_NEW || kind == Op.RECORD_PUT_OVER) {
                        rec.add(bytes());
                        rec.add(bytes());
                    } else if (kind == Op.RECORD_REMOVE || kind == Op.RECORD_REMOVE_PRESENT) {
                        rec.add(bytes());
                        rec.add(null);
                    } else if (kind == Op.RECORD_ACCESS) {
                        rec.add(null);
                        rec.add(u32());
                    } else if (kind == Op.RECORD_PUT_OVER_LIVE) {
                        rec.add(bytes());
                        rec.add(bytes());
                        rec.add(i64());
                    } else if (kind == Op.RECORD_REMOVE_LIVE) {
                        rec.add(bytes());
                        rec.add(null);
                        rec.add(i64());
                    } else {
                        throw new ProtocolException("unknown write record kind " + kind);
                    }
                    records.add(rec);
                }
                f.put("records", records);
                break;
            }
            case Op.GET:
                f.put("key", bytes());
                break;
            case Op.MULTI_GET: {
                List<Object> keys = new ArrayList<>();
                for (int i = 0, n = count(4); i < n; i++) {
                    keys.add(bytes());
                }
                f.put("keys", keys);
                break;
            }
            case Op.ITER_OPEN: {
                f.put("prefix", bytes());
                f.put("maxEntries", u32());
                int mode = u8();
                if (mode != Op.ITER_PAIRS && mode != Op.ITER_PAIRS_WITH_EXPIRY && mode != Op.ITER_STORED_WITH_EXPIRY) {
                    throw new ProtocolException("unknown iterator mode " + mode);
                }
                f.put("mode", (long) mode);
                break;
            }
            case Op.ITER_NEXT:
                f.put("maxEntries", u32());
                break;
            case Op.COMMIT:
                f.put("newVersion", i64());
                f.put("changelogPath", str());
                break;
            case Op.SNAPSHOT:
                f.put("dir", str());
                break;
            case Op.MANIFEST_FILES:
                f.put("path", str());
                f.put("version", i64());
                break;
            case Op.READ_CHANGELOG:
                f.put("path", str());
                f.put("version", i64());
                f.put("fromRecord", i64());
                f.put("maxRecords", u32());
                break;
            case Op.CLOSE:
                f.put("deleteFiles", bool());
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
            String sep = "";
            for (Map.Entry<?, ?> e : new TreeMap<>((Map<?, ?>) v).entrySet()) {
                sb.append(sep);
                sep = ",";
                quote(sb, (String) e.getKey());
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof List) {
            sb.append('[');
            String sep = "";
            for (Object o : (List<?>) v) {
                sb.append(sep);
                sep = ",";
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
        return java.util.HexFormat.of().formatHex(b);
    }
}
