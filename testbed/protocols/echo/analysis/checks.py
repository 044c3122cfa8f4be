"""History checks of the echo test protocol (on ``echo_send`` / ``echo_recv``).

``echo_fifo``        each receiver sees one sender's pings (and pongs) with
                     increasing ``seq`` (the runtime's links are FIFO; a node
                     restart starts its seqs again, so this holds per incarnation
                     only: use it on runs without restarts).
``echo_no_phantom``  every ping received was sent: an ``echo_send`` of the same
                     ``seq`` from ``src`` to the receiver exists.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from testbed.analysis.checks import CheckResult, summarize
from testbed.analysis.context import AnalysisContext


def check_fifo(ctx: AnalysisContext) -> CheckResult:
    recv = ctx.df("echo_recv")
    w = Window.partitionBy("node", "src", "kind").orderBy("m")
    v = (recv.withColumn("prev_seq", F.lag("seq").over(w))
         .where(F.col("prev_seq").isNotNull() & (F.col("seq") <= F.col("prev_seq")))
         .select("node", "src", "kind", "prev_seq", "seq", "t_rel_s"))
    return summarize("echo_fifo", "each receiver gets a sender's messages in increasing seq order", v,
                     order=["node", "src", "t_rel_s"])


def check_no_phantom(ctx: AnalysisContext) -> CheckResult:
    recv = ctx.df("echo_recv").where(F.col("kind") == "ping")
    sent = ctx.df("echo_send").select(F.col("node").alias("src"), F.col("dst").alias("node"), "seq")
    v = recv.join(sent, ["src", "node", "seq"], "left_anti").select("node", "src", "seq", "t_rel_s")
    return summarize("echo_no_phantom", "every ping received was sent by its source", v,
                     order=["node", "src", "seq"])


CHECKS = [check_fifo, check_no_phantom]
