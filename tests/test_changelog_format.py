"""The changelog file format is its own, versioned by its magic, not by the wire protocol:
its record kinds are pinned here, so a change to the protocol's WRITE_BATCH records cannot
change the bytes on disk unnoticed (docs/decisions/049-one-owner-per-rule.md)."""

import random

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


def test_records_added_at_once_read_back_as_added_one_by_one(tmp_path):
    # `add_all` (a TTL frame's writes) encodes its own way: the file must still read back as the
    # entries, long keys and values (lengths past its table of made ones) included
    rng = random.Random(5)
    entries = [(rng.randbytes(rng.choice([1, 36, 5000])),
                None if rng.random() < 0.3 else rng.randbytes(rng.choice([0, 8, 4095, 4096, 70000])))
               for _ in range(300)]
    files = []
    for name, add in (("all", lambda w: w.add_all(entries)),
                      ("each", lambda w: [w.add(k, v) for k, v in entries])):
        writer = statefile.ChangelogWriter(str(tmp_path / f"{name}.tmp"), FILE_CHANGELOG, 1, LAYOUT_PLAIN)
        add(writer)
        writer.finish(str(tmp_path / f"{name}.changelog"))
        _, got = statefile.read(str(tmp_path / f"{name}.changelog"), FILE_CHANGELOG, 1)
        assert list(got) == entries
        files.append((tmp_path / f"{name}.changelog").read_bytes())
    assert files[0] == files[1]
