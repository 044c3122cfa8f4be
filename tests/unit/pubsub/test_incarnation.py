from testbed.nodes.pubsub.clients import _next_incarnation


def test_restarted_publisher_continues_with_higher_seqs(tmp_path):
    d = str(tmp_path / "state")
    assert _next_incarnation(d) == 0
    assert _next_incarnation(d) == 1
    assert _next_incarnation(d) == 2
    assert _next_incarnation(None) == 0
