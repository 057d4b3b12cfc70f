package io.ttlstate.spark.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;

/**
 * The shared protocol vectors (tests/vectors/frames.tsv: name, body in hex, canonical
 * decoding by the Python reference decoder): {@link FrameReader} decodes every body as Python
 * does and refuses every {@code bad-*} one, and {@link FrameWriter}, writing the decoded fields
 * again, produces the same body.
 */
class FrameVectorsTest {
    static Stream<String[]> vectors() {
        List<String[]> rows = Vectors.rows("frames.tsv");
        assertTrue(rows.size() >= 30, "frames.tsv has " + rows.size() + " vectors");
        rows.forEach(r -> assertEquals(3, r.length, "malformed vector line: " + String.join("\t", r)));
        return rows.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("vectors")
    void decodesAndEncodesAsTheVectorSays(String name, String hex, String expected) throws ProtocolException {
        byte[] body = HexFormat.of().parseHex(hex);
        FrameWriter echo = new FrameWriter();
        String json = RequestJson.canonical(body, echo);
        assertEquals(expected, json, name);
        if (name.startsWith("bad-")) {
            assertEquals("ERROR", json, name + " must be refused");
            return;
        }
        assertArrayEquals(body, echo.body(), "FrameWriter's body of " + name);
        byte[] frame = Arrays.copyOf(echo.frame(), echo.frameLength());
        assertEquals(body.length, new FrameReader(frame, 0, 4).i32(), "length prefix of " + name);
        assertArrayEquals(body, Arrays.copyOfRange(frame, 4, frame.length), "frame of " + name);
    }
}
