from testbed.protocols.pubsub.nodes.clients import next_incarnation


def test_restarted_publisher_continues_with_higher_seqs(tmp_path):
    d = str(tmp_path / "state")
    assert next_incarnation(d) == 0
    assert next_incarnation(d) == 1
    assert next_incarnation(d) == 2
    assert next_incarnation(None) == 0
