"""Filters: parsing, and matches/intersects/covers checked against brute force on small domains."""

import itertools
import random

import pytest

from testbed.protocols.pubsub.nodes.filters import (
    FilterError, Pred, covers, intersects, make, matches, parse, parse_cached, topic,
)

NUM_SAMPLES = [x / 2 for x in range(-2, 9)]  # -1 .. 4 step 0.5
STR_SAMPLES = ["".join(t) for n in range(3) for t in itertools.product("\0abc", repeat=n)]
ABSENT = object()
VALUES = [ABSENT] + NUM_SAMPLES + STR_SAMPLES
PUBS = []
for vx, vy in itertools.product(VALUES, VALUES):
    p = {}
    if vx is not ABSENT:
        p["x"] = vx
    if vy is not ABSENT:
        p["y"] = vy
    PUBS.append(p)

OPS = ["eq", "neq", "<", "<=", ">", ">=", "isPresent", "str-prefix"]


def rand_filter(rng: random.Random) -> "object":
    preds = []
    for _ in range(rng.randint(0, 3)):
        attr = rng.choice("xy")
        op = rng.choice(OPS)
        if op == "str-prefix" or (op != "str-prefix" and rng.random() < 0.45):
            v = rng.choice(["", "a", "b"])
        else:
            v = rng.randint(0, 3)
        preds.append(Pred(attr, op, v))
    return make(preds)


def test_parse_examples_and_text_roundtrip():
    f = parse("[class,eq,'STOCK'],[price,>,50]")
    assert f.text == "[class,eq,'STOCK'],[price,>,50]"
    assert parse(f.text) == f
    assert parse("[price,>,50] , [class,=,'STOCK']") == f  # order, spaces, '=' alias
    assert hash(parse("[price,>,50],[class,eq,'STOCK']")) == hash(f)
    assert matches(f, {"class": "STOCK", "price": 51})
    assert not matches(f, {"class": "STOCK", "price": 50})
    assert not matches(f, {"class": "STOCK"})
    assert not matches(f, {"class": "STOCK", "price": "51"})  # typed
    g = parse("[s,str-prefix,'it\\'s'],[n,!=,-2.5],[m,isPresent,0],[k,neq,\"q\"]")
    assert parse(g.text) == g
    assert matches(g, {"s": "it's me", "n": 1, "m": 7.5, "k": "r"})
    assert not matches(g, {"s": "it's me", "n": 1, "m": "7", "k": "r"})
    assert not matches(g, {"s": "it's me", "n": 1, "m": 7, "k": 3})
    assert parse("") == make([]) and matches(parse("  "), {})
    assert not matches(parse("[a,eq,1]"), {"a": True})  # bool is not a number
    assert matches(parse("[a,eq,1]"), {"a": 1.0})
    assert topic(7) == parse("[topic,eq,7]")
    assert parse_cached("[a,eq,1]") is parse_cached("[a,eq,1]")


@pytest.mark.parametrize("bad,col", [
    ("[a,eq,x]", 7), ("[a,foo,1]", 4), ("[a,eq,1", 8), ("[a,str-prefix,3]", 15),
    ("[1a,eq,1]", 2), ("[a,eq,'x]", 7), ("[a,eq,1][b,eq,2]", 9), ("[a,eqq,1]", 4),
    ("[a,eq,1],", 10),
])
def test_parse_errors_are_one_line_with_column(bad, col):
    with pytest.raises(FilterError) as ei:
        parse(bad)
    msg = str(ei.value)
    assert "\n" not in msg and f"col {col}:" in msg, msg


def test_mixed_types_on_one_attribute_is_unsatisfiable():
    f = parse("[a,eq,1],[a,eq,'1']")
    assert not f.satisfiable
    assert not intersects(f, f) and covers(parse("[b,eq,1]"), f)
    assert not covers(f, parse("[a,eq,1]"))


def test_string_order_is_discrete():
    assert not parse("[s,<,'']").satisfiable
    f = parse("[s,>=,'a'],[s,<=,'a']")
    assert covers(parse("[s,eq,'a']"), f) and covers(f, parse("[s,eq,'a']"))
    assert not parse("[s,>,'a'],[s,<,'a'],[s,eq,'a']").satisfiable
    assert not parse("[s,>=,'a'],[s,<=,'a'],[s,neq,'a']").satisfiable
    assert covers(parse("[s,str-prefix,'']"), parse("[s,isPresent,'z']"))
    assert covers(parse("[s,isPresent,'']"), parse("[s,str-prefix,'ab']"))
    assert covers(parse("[s,>=,'ab'],[s,<,'ac']"), parse("[s,str-prefix,'ab']"))
    assert covers(parse("[s,str-prefix,'ab']"), parse("[s,>=,'ab'],[s,<,'ac']"))
    assert not covers(parse("[s,str-prefix,'ab']"), parse("[s,>=,'ab'],[s,<=,'ac']"))


def test_numbers_are_dense_and_neq_splits():
    assert intersects(parse("[x,>,1]"), parse("[x,<,2]"))
    assert covers(parse("[x,neq,3]"), parse("[x,>,3]"))
    assert not covers(parse("[x,neq,3]"), parse("[x,>=,3]"))
    assert covers(parse("[x,>=,0],[x,neq,2]"), parse("[x,>,1],[x,<,2]"))
    assert covers(parse("[x,isPresent,0]"), parse("[x,eq,1.5]"))
    assert not covers(parse("[x,isPresent,0]"), parse("[x,eq,'1.5']"))


def _brute(f, g):
    mf = [matches(f, p) for p in PUBS]
    mg = [matches(g, p) for p in PUBS]
    inter = any(a and b for a, b in zip(mf, mg))
    cov = all(a for a, b in zip(mf, mg) if b)
    return inter, cov


@pytest.mark.parametrize("seed", range(4))
def test_relations_agree_with_brute_force(seed):
    rng = random.Random(seed)
    for _ in range(150):
        f, g = rand_filter(rng), rand_filter(rng)
        if rng.random() < 0.3:  # bias towards related pairs
            g = make(list(f.preds) + list(rand_filter(rng).preds)[:1])
        inter, cov = _brute(f, g)
        assert intersects(f, g) == inter, (f.text, g.text)
        assert intersects(g, f) == inter, (f.text, g.text)
        assert covers(f, g) == cov, (f.text, g.text)
        # the textual form round-trips with the same semantics
        assert parse(f.text) == f


def test_covers_is_reflexive_and_transitive_on_samples():
    rng = random.Random(99)
    fs = [rand_filter(rng) for _ in range(40)]
    for f in fs:
        assert covers(f, f)
    for f, g, h in itertools.product(fs[:15], repeat=3):
        if covers(f, g) and covers(g, h):
            assert covers(f, h), (f.text, g.text, h.text)
