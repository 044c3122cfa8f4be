import pytest

from testbed.analysis.filters import FilterSyntaxError, Predicate, match_pairs, matches, parse

ATTRS = [
    {"class": "STOCK", "price": 10, "sym": "IBM", "vol": 2.5},
    {"class": "STOCK", "price": 25.0, "sym": "IBX"},
    {"class": "BOND", "price": "10"},
    {"class": "STOCK", "flag": True, "price": -3},
    {"sym": "", "price": 1e3},
    {"price": None, "sym": "IBM", "flag": None},  # JSON null: present, of no type
    {},
    {"a.b": 1, "x-y$": "v", "q\\r": 2.5, "é": "ü"},  # names a JSON path would read otherwise
]
FILTERS = [
    "",
    "[class,eq,'STOCK']",
    "[class,=,\"STOCK\"],[price,>,10]",
    "[class,neq,'STOCK']",
    "[class,!=,'STOCK']",
    "[price,<,10]",
    "[price,<=,10]",
    "[price,>=,10]",
    "[price,eq,10]",
    "[price,eq,'10']",
    "[price,isPresent,0]",
    "[price,isPresent,'']",
    "[price,isPresent]",
    "[sym,str-prefix,'IB']",
    "[sym,str-prefix,'']",
    "[sym,>,'IBM']",
    "[flag,isPresent,0]",
    "[flag,isPresent]",
    "[class,eq,'STOCK'],[vol,<,3],[sym,str-prefix,'IBM']",
    "[price,>,-5.5e0],[price,<,1e4]",
    "[a.b,eq,1]",
    "[x-y$,isPresent]",
    "[q\\r,>,2]",
    "[é,eq,'ü']",
]


def test_parse_forms():
    assert parse("") == ()
    assert parse(" [a , = , 'x y' ] , [b,>=,-1.5e2]") == (Predicate("a", "eq", "x y"), Predicate("b", ">=", -150.0))
    assert parse("[a,isPresent]") == (Predicate("a", "isPresent", None),)
    assert parse("[a,!=,3]")[0].op == "neq"
    assert parse(r"[n,eq,'O\'Brien'],[p,str-prefix,'a\\b']") == (Predicate("n", "eq", "O'Brien"),
                                                                  Predicate("p", "str-prefix", "a\\b"))


@pytest.mark.parametrize("bad", ["[a,eq]", "[a,like,'x']", "a,eq,1", "[a,eq,'x'", "[a,eq,x]",
                                 "[a,eq,1],", "[a,eq,1][b,eq,2]", "[a,str-prefix,3]", "[,eq,1]"])
def test_parse_errors(bad):
    with pytest.raises(FilterSyntaxError, match="column"):
        parse(bad)


@pytest.mark.parametrize("flt,attrs,want", [
    ("[class,eq,'STOCK']", ATTRS[0], True),
    ("[class,eq,'STOCK']", ATTRS[2], False),
    ("[class,eq,'STOCK']", {}, False),
    ("[class,eq,'STOCK'],[price,>,10]", ATTRS[0], False),  # all predicates must hold
    ("[class,eq,'STOCK'],[price,>,10]", ATTRS[1], True),
    ("[price,eq,10]", ATTRS[2], False),  # string "10" is not the number 10
    ("[price,eq,'10']", ATTRS[2], True),
    ("[class,neq,'STOCK']", {"x": 1}, False),  # neq needs the attribute present
    ("[flag,isPresent,0]", ATTRS[3], False),  # a boolean is not a number
    ("[flag,isPresent]", ATTRS[3], True),
    ("[sym,str-prefix,'IB']", ATTRS[1], True),
    ("[sym,str-prefix,'IB']", ATTRS[4], False),
    ("", {}, True),
])
def test_matches(flt, attrs, want):
    assert matches(flt, attrs) is want


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled-columns", "join"])
def test_spark_evaluator_agrees_with_python(spark, compiled):
    import json

    pubs = spark.createDataFrame([(f"p:{i}", json.dumps(a)) for i, a in enumerate(ATTRS)], "pub_id string, attrs string")
    filters = spark.createDataFrame([(f,) for f in FILTERS + ["[bad"]], "filter string")
    pairs, errors = match_pairs(spark, filters, pubs, compiled=compiled)
    got = [(r["filter"], r["pub_id"]) for r in pairs.collect()]
    assert len(got) == len(set(got))  # each match once
    got = set(got)
    want = {(f, f"p:{i}") for f in FILTERS for i, a in enumerate(ATTRS) if matches(f, a)}
    assert got == want
    assert list(errors) == ["[bad"]
    assert len(want) > 20  # the grid exercises both outcomes
    assert len(want) < len(FILTERS) * len(ATTRS)
