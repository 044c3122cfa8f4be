"""Test support shared by tests/ and benchmarks/ (never imported by the rest of ``testbed``).

- :mod:`~testbed.testing.harness`: real node processes on loopback by hand (runtime tests,
  ``bench_hop``, ``bench_link``).
- :mod:`~testbed.testing.testhosts`: the SSH test hosts (containers) of the Ansible tests and
  ``bench_ansible``.
- :mod:`~testbed.testing.synthetic`: synthetic run directories with known answers (analysis tests,
  ``bench_analysis``).
- :mod:`~testbed.testing.forgetful`: a deliberately broken pub/sub variant (a broker that never
  re-syncs a neighbour coming back), registered through an entry point only by the tests of
  ``testbed explore``.

- :mod:`~testbed.testing.contracts`: the ``builds_on`` import-linter contract type (protocols
  import each other only where ``BUILDS_ON`` says so), used by ``lint-imports``.

An import-linter contract in ``pyproject.toml`` keeps the package free of imports of this one.
"""
