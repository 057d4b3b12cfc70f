"""The changelog file format is its own, versioned by its magic, not by the wire protocol:
its record kinds are pinned here, so a change to the protocol's WRITE_BATCH records cannot
change the bytes on disk unnoticed (docs/decisions/049-one-owner-per-rule.md)."""

from service_client import encode_records
from ttlstate import protocol, statefile
from ttlstate.statefile import FILE_CHANGELOG, FileMeta, LAYOUT_PLAIN


def test_the_file_format_declares_its_own_constants():
    assert statefile.MAGIC == b"TTLSTAT3" and FILE_CHANGELOG == 2
    assert (statefile.PUT, statefile.REMOVE, statefile.PUT_NEW, statefile.PUT_OVER,
            statefile.REMOVE_PRESENT) == (1, 2, 4, 5, 6)


def test_wire_records_are_copied_only_while_they_encode_as_the_file_does(tmp_path):
    # today they do, and a direct transaction copies them: the copy reads back as written
    assert statefile.WIRE_RECORDS_ARE_FILE_RECORDS
    records = [(protocol.RECORD_PUT_NEW, b"a", b"1"), (protocol.RECORD_PUT_OVER, b"b", b"2"),
               (protocol.RECORD_REMOVE_PRESENT, b"c", None), (protocol.RECORD_PUT, b"d", b"4"),
               (protocol.RECORD_REMOVE, b"e", None)]
    encoded = encode_records(protocol.Writer(), records).body()
    writer = statefile.ChangelogWriter(str(tmp_path / "1.changelog.tmp"), FILE_CHANGELOG, 1, LAYOUT_PLAIN)
    writer.add_encoded(encoded, len(records))
    writer.finish(str(tmp_path / "1.changelog"))
    meta, got = statefile.read(str(tmp_path / "1.changelog"), FILE_CHANGELOG, 1)
    assert meta == FileMeta(LAYOUT_PLAIN, -1, b"")
    assert list(got) == [(k, v) for _, k, v in records]
