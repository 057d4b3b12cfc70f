package io.ttlstate.spark.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * {@link BytewiseSort} orders keys as RocksDB does, bytewise and unsigned, a key before every
 * longer key it is a prefix of: Python's order of {@code bytes}
 * (docs/decisions/088-bytewise-sort.md). The key sets hit
 * its cases: a long common prefix, keys that are prefixes of others, equal six-byte prefixes,
 * duplicates, bytes above 0x7f, empty keys, the largest block it sorts packed and one past it.
 */
class BytewiseSortTest {
    /** The order of Python's {@code bytes}, written out (not {@code Arrays.compareUnsigned}, which the sort uses). */
    private static final Comparator<byte[]> BYTEWISE = (a, b) -> {
        for (int i = 0; i < Math.min(a.length, b.length); i++) {
            if (a[i] != b[i]) {
                return (a[i] & 0xFF) - (b[i] & 0xFF);
            }
        }
        return a.length - b.length;
    };

    private static byte[] randomBytes(Random rng, int n) {
        byte[] b = new byte[n];
        rng.nextBytes(b);
        return b;
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    private static byte[] bigEndian(long v) {
        return ByteBuffer.allocate(8).putLong(v).array();
    }

    static Stream<Arguments> keySets() {
        Random rng = new Random(88);
        List<byte[]> unsafeRow = new ArrayList<>(); // an UnsafeRow of one long: 8 bytes of null bits in common
        for (int i = 0; i < 5000; i++) {
            unsafeRow.add(ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(8, rng.nextInt(10_000_000)).array());
        }
        List<byte[]> longPrefix = new ArrayList<>();
        for (int i = 0; i < 3000; i++) {
            longPrefix.add(concat("p".repeat(20).getBytes(), randomBytes(rng, rng.nextInt(12))));
        }
        List<byte[]> ties = new ArrayList<>(); // equal on six bytes, and keys that are prefixes of them
        for (int i = 0; i < 400; i++) {
            ties.add(concat("same6!".getBytes(), randomBytes(rng, 1)));
        }
        ties.add("same6!".getBytes());
        ties.add("same6".getBytes());
        List<byte[]> high = new ArrayList<>();
        for (int i = 0; i < 2000; i++) {
            high.add(randomBytes(rng, 1 + rng.nextInt(8)));
        }
        List<byte[]> duplicates = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            duplicates.add(unsafeRow.get(rng.nextInt(50)));
        }
        List<byte[]> packedMax = new ArrayList<>();
        for (int i = 0; i < BytewiseSort.MAX_PACKED + 1; i++) {
            packedMax.add(bigEndian(rng.nextLong() & ((1L << 40) - 1)));
        }
        List<List<byte[]>> sets = List.of(List.of(), List.of("only".getBytes()),
                List.of(new byte[0], new byte[] {0}, new byte[0], "a".getBytes()), unsafeRow, longPrefix, ties, high,
                duplicates, packedMax.subList(0, BytewiseSort.MAX_PACKED), packedMax);
        String[] names = {"empty", "one", "empty keys", "UnsafeRow longs", "long common prefix", "six-byte ties",
            "high bytes", "duplicates", "largest packed block", "one past: the comparator"};
        List<Arguments> out = new ArrayList<>();
        for (int i = 0; i < sets.size(); i++) {
            List<byte[]> keys = new ArrayList<>(sets.get(i));
            Collections.shuffle(keys, rng);
            out.add(Arguments.of(names[i], keys));
        }
        return out.stream();
    }

    private static List<String> hex(List<byte[]> keys) {
        return keys.stream().map(HexFormat.of()::formatHex).collect(Collectors.toList());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("keySets")
    void sortsAsPythonOrdersBytes(String name, List<byte[]> keys) {
        List<byte[]> expected = new ArrayList<>(keys);
        expected.sort(BYTEWISE);
        byte[][] sorted = BytewiseSort.sorted(keys.toArray(new byte[0][]), keys.size());
        assertEquals(hex(expected), hex(Arrays.asList(sorted)), name);
    }

    @Test
    void ordersUnsignedAndPrefixesFirst() {
        byte[][] keys = {{(byte) 0x80}, {0x7f}, {0x01, 0x00}, {0x01}, {}, {(byte) 0xff, 0}, {(byte) 0xff}};
        byte[][] sorted = BytewiseSort.sorted(keys, keys.length);
        assertEquals(List.of("", "01", "0100", "7f", "80", "ff", "ff00"), hex(Arrays.asList(sorted)));
    }

    @Test
    void sortsOnlyTheFirstNKeysIntoANewArray() {
        byte[][] keys = {{3}, {1}, {2}, {0}};
        byte[][] copy = keys.clone();
        byte[][] sorted = BytewiseSort.sorted(keys, 3);
        assertEquals(List.of("01", "02", "03"), hex(Arrays.asList(sorted)));
        assertArrayEquals(copy, keys); // the input stays as it was
        assertSame(keys[1], sorted[0]); // the keys themselves, not copies
    }
}
