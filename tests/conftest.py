"""Suite-wide rules: markers applied automatically, a check that a test carries the markers of what
it really starts, the one Spark fixture, and the CI rule on skips (docs/testing.md).

Markers (pyproject.toml lists them) are applied at collection, so they reach tests written later:

* from the fixtures a test uses (directly or through other fixtures): ``spark`` -> ``spark``,
  ``engine`` -> ``docker``;
* from its folder: everything under ``tests/integration`` is ``slow``;
* by hand: ``ssh``, ``browser``, ``spark_cluster``, ``proc``, ``serial`` (and ``spark``/``docker``
  for a test that starts them without the fixtures);
* derived: a test marked ``spark``, ``proc``, ``docker``, ``ssh``, ``browser`` or ``spark_cluster`` is
  also ``slow``; ``spark_cluster`` is also ``serial`` (it runs alone, see below).

So ``pytest -m "not slow"`` is the pure layers (``./scripts/test.sh --fast``).

What a test starts is watched while it sets up and runs (an audit hook on process starts,
wrappers on Spark's session builder and on the wipes, and a ``spark-env.sh`` that notes a Spark
started by a subprocess): a test that starts Spark, a node process
or the testbed CLI, Docker, SSH/Ansible or a browser without the marker fails at teardown with a
one-line reason, and so does a test that removes every testbed process/container (``wipe``)
without the ``serial`` marker. Under ``tests/integration`` (all ``slow``, run only by the whole
suite) only ``serial`` is enforced. The check cannot be fooled by test order: a Spark session that an
earlier test started counts as soon as this test asks for it.

In CI (``CI=true``) a skipped test marked ``docker``, ``ssh``, ``browser`` or ``spark_cluster`` fails the run:
those tests exist to exercise the real engine, real SSH and a real browser, and a skip would
hide untested code.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

_REQUIRED_MARKERS = ("docker", "ssh", "browser", "spark_cluster")
_skipped_required: list[str] = []

# markers that take a test out of the pure layers (and make it ``slow``)
_HEAVY = ("spark", "proc", "docker", "ssh", "browser", "spark_cluster")
# fixture name -> marker, for every test that uses the fixture (directly or through another)
_FIXTURE_MARKERS = {"spark": "spark", "engine": "docker"}
# folder (relative to tests/) -> markers of every test under it
_FOLDER_MARKERS = {"integration": ("slow",)}
_TESTS = Path(__file__).resolve().parent


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


# --- markers applied automatically --------------------------------------------------------------

def markers_for(rel_parts: tuple[str, ...], fixturenames: list[str] | tuple[str, ...],
                present: set[str]) -> set[str]:
    """The markers to add to a test: ``rel_parts`` is its path under tests/, ``present`` the
    markers it already has (by hand)."""
    add = set()
    for fx, m in _FIXTURE_MARKERS.items():
        if fx in fixturenames:
            add.add(m)
    if rel_parts:
        add.update(_FOLDER_MARKERS.get(rel_parts[0], ()))
    have = present | add
    if have & set(_HEAVY):
        add.add("slow")
    if "spark_cluster" in have:
        add.add("serial")
    return add - present


def _rel(item: pytest.Item) -> tuple[str, ...]:
    try:
        return Path(str(item.path)).resolve().relative_to(_TESTS).parts
    except ValueError:
        return ()


def _folder(item: pytest.Item) -> str:
    rel = _rel(item)
    return rel[0] if len(rel) > 1 else ""


DURATIONS = Path(__file__).parent / "file_durations.json"
UNKNOWN_FILE_S = 10  # a file the durations do not list yet (a new one): about a median file


def longest_files_first(items: list, file_of, durations: dict[str, int]) -> list:
    """The items, their files longest first by ``durations`` (file -> s, from a measured run:
    ``scripts/suite_timeline.py --write-durations``), each file's items together and in their
    order. Pure. xdist's ``--dist loadfile`` hands files to the workers in collection order:
    this is longest-processing-time-first, so a long file does not start near the end and hold
    the pass open alone (measured: test_reproduce_ansible.py, 225 s, started at +1374 s and ended
    the parallel pass at +1599 s while the other workers had finished 70-160 s earlier)."""
    first: dict[str, int] = {}
    for i, it in enumerate(items):
        first.setdefault(file_of(it), i)
    return sorted(items, key=lambda it: (-durations.get(file_of(it), UNKNOWN_FILE_S), first[file_of(it)]))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = _rel(item)
        present = {m.name for m in item.iter_markers()}
        for m in sorted(markers_for(rel, getattr(item, "fixturenames", ()), present)):
            item.add_marker(m)
    if longest_first_wanted():
        try:
            durations = json.loads(DURATIONS.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            durations = {}
        items[:] = longest_files_first(items, lambda it: it.nodeid.split("::", 1)[0], durations)


ORDER_ENV = "TESTBED_TEST_ORDER"


def longest_first_wanted() -> bool:
    """``TESTBED_TEST_ORDER=longest-first``: hand out the files longest first (opt-in). Measured on
    this 2-core machine (docs/testing.md) it balanced the four workers to within 1 s but did not
    shorten the pass: the heaviest files running together slowed one another (busy time +7 %)."""
    return os.environ.get(ORDER_ENV, "") == "longest-first"


# --- what a test really starts ------------------------------------------------------------------

_watch: dict = {"on": False, "did": {}}


def _did(what: str, detail: str) -> None:
    if _watch["on"]:
        _watch["did"].setdefault(what, detail)


_CLI_MODULES = ("testbed.cli", "testbed.nodes", "testbed.faults.controller")


def classify_argv(argv: list[str]) -> list[tuple[str, str]]:
    """What starting ``argv`` counts as: ``[(marker, detail)]`` (empty: nothing the tiers care about)."""
    if not argv:
        return []
    exe = os.path.basename(str(argv[0]))
    words = [str(a) for a in argv]
    out = []
    if exe in ("docker", "dockerd"):
        out.append(("docker", " ".join(words[:3])))
    if exe in ("ssh", "scp", "sftp") or exe.startswith("ansible"):
        out.append(("ssh", " ".join(words[:2])))
    if "chrom" in exe:
        out.append(("browser", exe))
    if exe == "java" or exe == "spark-submit" or "spark-class" in exe:
        out.append(("spark", exe))
    mod = None
    if "-m" in words[:-1]:
        mod = words[words.index("-m") + 1]
    if exe == "testbed" or (mod is not None and any(mod == m or mod.startswith(m + ".") for m in _CLI_MODULES)):
        out.append(("proc", " ".join(words[:5])))
        rest = words[words.index(mod) + 1:] if mod is not None else words[1:]
        if "wipe" in rest:
            out.append(("serial", "testbed wipe"))
    return out


def _audit(event: str, args: tuple) -> None:
    if not _watch["on"]:
        return
    if event == "subprocess.Popen":
        argv = args[1]
        if isinstance(argv, (str, bytes)):
            argv = [argv]
        for what, detail in classify_argv(list(argv or [])):
            _did(what, detail)


def _wrap(owner: object, name: str, what: str, detail: str, *, when=None) -> None:
    """Note ``what`` whenever ``owner.name`` is called (``when(result)``: only if it says so)."""
    raw = owner.__dict__[name]
    func = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw

    def wrapper(*a, **kw):
        if when is None:  # an attempt counts, whether or not it succeeds
            _did(what, detail)
        result = wrapper.__wrapped__(*a, **kw)
        if when is not None and when(result):
            _did(what, detail)
        return result

    wrapper.__wrapped__ = func
    if isinstance(raw, classmethod):
        setattr(owner, name, classmethod(wrapper))
    elif isinstance(raw, staticmethod):
        setattr(owner, name, staticmethod(wrapper))
    else:
        setattr(owner, name, wrapper)


def _install_watchers() -> None:
    sys.addaudithook(_audit)
    from pyspark.sql import SparkSession

    _wrap(SparkSession.Builder, "getOrCreate", "spark", "a SparkSession")
    _wrap(SparkSession, "getActiveSession", "spark", "the active SparkSession", when=lambda s: s is not None)
    try:
        from testbed.providers import engine

        _wrap(engine, "connect", "docker", "the Docker engine") if hasattr(engine, "connect") else None
    except ImportError:  # the docker extra is not installed
        pass
    import testbed.api as api
    from testbed.providers.local.provider import LocalProvider

    _wrap(api, "wipe", "serial", "testbed wipe")
    _wrap(LocalProvider, "wipe", "serial", "LocalProvider.wipe (every testbed process here)")
    try:
        from testbed.providers.docker.provider import DockerProvider

        _wrap(DockerProvider, "wipe", "serial", "DockerProvider.wipe (every testbed container)")
    except ImportError:
        pass
    try:
        from testbed.providers.ansible.provider import AnsibleProvider

        # with a host registry of its own (SSHHosts.use) a test wipes only its own hosts
        _wrap(AnsibleProvider, "wipe", "serial", "AnsibleProvider.wipe with the shared host registry",
              when=lambda _r: not os.environ.get("TESTBED_ANSIBLE_REGISTRY"))
    except ImportError:
        pass


def pytest_configure(config: pytest.Config) -> None:
    if not getattr(config, "_testbed_watch", False):
        config._testbed_watch = True
        _install_watchers()
        _install_spark_probe()
    # a test that names no runs directory writes under its own process's, never the checkout's
    # runs/ shared with the other workers (and their `.active` record)
    # (set in each xdist worker, not in the controller whose environment the workers inherit)
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    # xdist would re-sort the files by their number of tests; with the longest-first order, keep
    # the collection order (longest_files_first)
    if longest_first_wanted() and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    _session["worker"] = hasattr(config, "workerinput")
    if not controller and not os.environ.get("TESTBED_RUNS"):
        import atexit
        import shutil
        import tempfile

        runs = tempfile.mkdtemp(prefix="testbed-test-runs-")
        os.environ["TESTBED_RUNS"] = runs
        atexit.register(shutil.rmtree, runs, True)


_WHY = {
    "spark": "started or used Spark",
    "proc": "started node processes or the testbed CLI",
    "docker": "used the Docker engine",
    "ssh": "used SSH/Ansible",
    "browser": "started a browser",
    "serial": "removed every testbed process/container (wipe)",
}


def missing_markers(did: dict[str, str], present: set[str]) -> list[str]:
    """One line per thing a test did without the marker that says so."""
    return [f"{_WHY.get(w, w)} ({detail}) but is not marked {w}: add @pytest.mark.{w}"
            for w, detail in sorted(did.items()) if w not in present]


# Spark started in a subprocess (the CLI, `python -c ...`): every spark-submit/spark-class sources
# $SPARK_CONF_DIR/spark-env.sh, which here touches the file the running test's
# TESTBED_TEST_SPARK_PROBE names (children inherit it). Only when SPARK_CONF_DIR was not set already.
_SPARK_ENV_SH = '[ -n "${TESTBED_TEST_SPARK_PROBE:-}" ] && : > "$TESTBED_TEST_SPARK_PROBE"; true\n'
_probe: dict = {"dir": None, "n": 0}


def _install_spark_probe() -> None:
    mine = os.environ.get("TESTBED_TEST_SPARK_CONF")
    if mine and os.environ.get("SPARK_CONF_DIR") == mine and os.path.isdir(mine):
        _probe["dir"] = mine  # an xdist worker: the controller's
        return
    if os.environ.get("SPARK_CONF_DIR"):
        return
    import atexit
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="testbed-test-sparkconf-")
    Path(d, "spark-env.sh").write_text(_SPARK_ENV_SH)
    os.environ["SPARK_CONF_DIR"] = os.environ["TESTBED_TEST_SPARK_CONF"] = d
    _probe["dir"] = d
    atexit.register(shutil.rmtree, d, True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    _watch["did"] = {}
    _watch["on"] = True
    if _probe["dir"]:
        _probe["n"] += 1
        os.environ["TESTBED_TEST_SPARK_PROBE"] = os.path.join(_probe["dir"], f"probe-{os.getpid()}-{_probe['n']}")
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem):
    _watch["on"] = False  # a module fixture torn down here belongs to earlier tests too
    probe = os.environ.pop("TESTBED_TEST_SPARK_PROBE", None)
    if probe and os.path.exists(probe):
        _watch["did"].setdefault("spark", "spark-submit in a subprocess")
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("TESTBED_TEST_TIMELINE"):
        report.user_properties.append(("cpu_cum", _cpu_cum()))
    if call.when != "teardown" or not _watch["did"]:
        return
    did = _watch["did"]
    if _folder(item) == "integration":  # all `slow`, run only by the whole suite: there only `serial` matters
        did = {w: d for w, d in did.items() if w == "serial"}
    lines = missing_markers(did, {m.name for m in item.iter_markers()})
    _watch["did"] = {}
    if lines and report.passed:
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid}: " + "; ".join(lines) + " (tests/conftest.py)"


# --- the one Spark session ----------------------------------------------------------------------

@pytest.fixture(scope="session")
def spark():
    """The tests' Spark session: one per process (per xdist worker), one set of settings whatever
    the order of the tests. Tiny inputs: settings that change speed only, never results
    (``SMALL_DATA_CONF``, see testbed/analysis/session.py)."""
    from testbed.analysis.session import SMALL_DATA_CONF, SMALL_DATA_JAVA_OPTS, spark_session

    from pyspark.sql import SparkSession

    s = spark_session(app="testbed-tests", conf=SMALL_DATA_CONF, java_opts=SMALL_DATA_JAVA_OPTS)
    _SPARK_BASE.clear()
    _SPARK_BASE.update(s.conf.getAll)
    real_stop = SparkSession.stop

    def stop(self):  # code under test stops "its" session (spark_session() hands it the active one):
        if self is not s:  # the shared one outlives every test of this worker, so later tests find it alive
            real_stop(self)

    SparkSession.stop = stop
    try:
        yield s
    finally:
        SparkSession.stop = real_stop
        _SPARK_BASE.clear()
        real_stop(s)


_SPARK_BASE: dict[str, str] = {}


def restore_settings(conf, base: dict[str, str]) -> list[str]:
    """Put a session's runtime settings back to ``base`` (what a test changed: ``tune_for_input``,
    ``conf.set``); returns the keys put back."""
    now = conf.getAll
    changed = []
    for k, v in now.items():
        if k not in base:
            if conf.isModifiable(k):
                conf.unset(k)
                changed.append(k)
        elif v != base[k] and conf.isModifiable(k):
            conf.set(k, base[k])
            changed.append(k)
    for k, v in base.items():
        if k not in now and conf.isModifiable(k):
            conf.set(k, v)
            changed.append(k)
    return changed


@pytest.fixture(autouse=True)
def _spark_settings_restored():
    """After every test, the shared session's runtime settings are the fixture's again, so no test
    sees what an earlier one set. Every test, not only the ``spark``-marked ones: code under test
    reaches the shared session through ``spark_session()`` from tests without the marker too, and
    one of those once left adaptive execution on for a later test (CI of aee32cf: ``tally`` took
    two jobs, the shuffle's map stage being its own job under adaptive execution)."""
    yield
    if _SPARK_BASE:
        from pyspark.sql import SparkSession

        s = SparkSession.getActiveSession()
        if s is not None:
            restore_settings(s.conf, _SPARK_BASE)


# --- CI: a skipped docker/ssh/browser/spark_cluster test fails the run ---------------------------

def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and any(m in report.keywords for m in _REQUIRED_MARKERS):
        _skipped_required.append(report.nodeid)
    _timeline(report)


_session = {"worker": False}  # this process is an xdist worker (pytest_configure)


def _cpu_cum() -> float:
    """CPU seconds this process has used so far: its own, its reaped children's (node processes, CLI
    subprocesses and their JVMs, ansible), and its live Spark JVM's (the session fixture's). Not the
    containers' (Docker's cgroups)."""
    total = sum(os.times()[:4])  # user, system; children's user, system
    gw = getattr(sys.modules.get("pyspark.context", None), "SparkContext", None)
    proc = getattr(getattr(gw, "_gateway", None), "proc", None)
    if proc is not None and proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
    return round(total, 2)


def _timeline(report: pytest.TestReport) -> None:
    """With TESTBED_TEST_TIMELINE=FILE (the controller's side under xdist): one CSV line per test phase,
    worker, nodeid, phase, start, stop (epoch s), the worker's CPU seconds so far (``_cpu_cum``);
    `scripts/suite_timeline.py FILE` shows where a run's
    wall time went (how busy the workers were, what ran last). docs/testing.md."""
    path = os.environ.get("TESTBED_TEST_TIMELINE")
    if not path or _session["worker"] or not getattr(report, "stop", 0):
        return
    worker = getattr(getattr(report, "node", None), "gateway", None)
    wid = getattr(worker, "id", "main")
    with open(path, "a", encoding="utf-8") as f:
        cpu = dict(report.user_properties).get("cpu_cum", "")
        f.write(f"{wid},{report.nodeid.replace(',', ';')},{report.when},{report.start:.3f},{report.stop:.3f},"
                f"{cpu}\n")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if in_ci() and _skipped_required:
        print(f"\nCI: {len(_skipped_required)} docker/ssh/browser/spark_cluster test(s) were skipped; that is a failure here:")
        for n in _skipped_required:
            print(f"  {n}")
        session.exitstatus = 1
