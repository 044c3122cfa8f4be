"""Spark analysis of a run directory: ingest, history checks, metrics, figures, report.

Entry point: :func:`testbed.analysis.job.analyze` (re-exported here lazily so
``import testbed.analysis`` does not import pyspark).
"""


def analyze(run_dir, **kwargs):
    from testbed.analysis.job import analyze as _analyze

    return _analyze(run_dir, **kwargs)
