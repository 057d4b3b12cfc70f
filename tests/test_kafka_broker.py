"""Unit test of the Kafka broker helper: its KRaft cluster id parses as an argument."""
import base64
import uuid

import kafka_broker


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch):
    dashed = uuid.UUID(bytes=base64.urlsafe_b64decode("-" + "A" * 21 + "=="))
    plain = uuid.UUID(int=1)
    ids = iter([dashed, plain])
    monkeypatch.setattr(kafka_broker.uuid, "uuid4", lambda: next(ids))
    assert kafka_broker.kraft_cluster_id() == base64.urlsafe_b64encode(plain.bytes).decode().rstrip("=")
