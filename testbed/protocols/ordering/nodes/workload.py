"""Topic popularity and subscriptions (Sec 5.2), stdlib only so client processes use it too.

Distribution: a truncated Zipf law over a site's topic ranking,
``P(rank r) = r**-s / H(N, s)`` for ranks ``1..N``. The paper names its two
models by a "shape" and defines them by their concentration: shape 0.901 =
0.5% of the topics get 80% of the picks ("geographic topic popularity"),
shape 0.349 = 40% of the topics get 80% ("spray-and-diffuse"). The exponent
``s`` is calibrated numerically (bisection) so that the top ``ceil(q*N)`` ranks
carry exactly 80% of the mass for the actual ``N`` (``q`` = 0.005 or 0.40).

A site's ranking: its own topics (those whose TM its server hosts) first, in
topic-id order, then every other topic in topic-id order. With one site (Fig 7-8)
the ranking is the topic order itself, as the paper does ("topic ranking was
defined to match the topic popularity").

Subscriptions (``k`` distinct topics per client, drawn without replacement with
probabilities proportional to the law: Efraimidis-Spirakis keys ``u**(1/w)``):

* shape 0.901 ("geographic topic popularity") at a site that hosts some but not all TMs:
  "just a small percentage of the clients of a geographic region subscribe to topics that
  are outside their region" (Sec 5.2). A client draws its topics from the site's *own*
  topics by the site's law (the publication law conditioned on the own topics), and with
  probability ``foreign_eps`` (independent of ``k``) one of its ``k`` slots instead holds
  one foreign topic, uniform over the other sites' topics. (Ranking the foreign topics
  after the own ones and drawing ``k`` distinct topics from the whole ranking put at least
  ``k - 5`` picks in the tail, so a third of the clients held a foreign topic.)
* shape 0.349 ("spray-and-diffuse": "these topics are subscribed by clients that can be of
  any region") and a site that hosts every TM or none: ``k`` topics from the whole ranking.

Publications: one topic per event drawn from the site's law over the whole ranking (with
replacement), as calibrated above.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from functools import lru_cache

# shape -> fraction of topics that receives 80% of the picks (Sec 5.2)
SHAPES: dict[float, float] = {0.901: 0.005, 0.349: 0.40}
MASS = 0.8
# shapes whose subscriptions stay in the site's own topics (plus foreign_eps), Sec 5.2
LOCAL_SHAPES = frozenset({0.901})
# "just a small percentage of the clients of a geographic region subscribe to topics that
# are outside their region" (Sec 5.2): the default per-client probability of one foreign topic
FOREIGN_EPS = 0.05


def _top_mass(n: int, s: float, top: int) -> float:
    w = [r ** -s for r in range(1, n + 1)]
    return sum(w[:top]) / sum(w)


@lru_cache(maxsize=64)
def zipf_exponent(n_topics: int, shape: float) -> float:
    """The Zipf exponent giving ``MASS`` of the picks to the top ``SHAPES[shape]`` of topics."""
    if shape not in SHAPES:
        raise ValueError(f"unknown popularity shape {shape}; known: {sorted(SHAPES)}")
    top = max(1, math.ceil(SHAPES[shape] * n_topics))
    if top >= n_topics:
        return 0.0
    lo, hi = 0.0, 8.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if _top_mass(n_topics, mid, top) < MASS:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@lru_cache(maxsize=64)
def rank_weights(n_topics: int, shape: float) -> tuple[float, ...]:
    s = zipf_exponent(n_topics, shape)
    w = [r ** -s for r in range(1, n_topics + 1)]
    z = sum(w)
    return tuple(x / z for x in w)


def site_ranking(n_topics: int, own: list[int]) -> list[int]:
    """Topics by decreasing popularity at a site whose own (local-TM) topics are ``own``."""
    own_set = set(own)
    return sorted(own) + [t for t in range(n_topics) if t not in own_set]


class Popularity:
    """The popularity law of one site: ``weights[topic]`` (publications) and draws from it.

    ``own``: the site's own topics (None: every topic); ``foreign_eps``: the per-client
    probability of one foreign topic in a subscription, for the local shapes (see above).
    """

    def __init__(self, n_topics: int, shape: float, own: list[int] | None = None,
                 foreign_eps: float = FOREIGN_EPS) -> None:
        if not 0.0 <= foreign_eps <= 1.0:
            raise ValueError(f"foreign_eps {foreign_eps} is not a probability")
        self.n = n_topics
        self.shape = shape
        self.foreign_eps = float(foreign_eps)
        ranking = site_ranking(n_topics, own if own is not None else list(range(n_topics)))
        rw = rank_weights(n_topics, shape)
        self.weights = [0.0] * n_topics
        for r, t in enumerate(ranking):
            self.weights[t] = rw[r]
        self._topics = ranking
        self._cum = list(itertools.accumulate(rw))
        own_set = set(own) if own is not None else set(range(n_topics))
        self.local = shape in LOCAL_SHAPES and 0 < len(own_set) < n_topics
        self.own = sorted(own_set)
        self.foreign = [t for t in range(n_topics) if t not in own_set] if self.local else []

    def pick(self, rng: random.Random) -> int:
        """One topic (a publication's)."""
        i = bisect.bisect_left(self._cum, rng.random() * self._cum[-1])
        return self._topics[min(i, self.n - 1)]

    def subscription_weights(self) -> dict[int, float]:
        """The law a subscription's (non-foreign) slots are drawn from: topic -> probability."""
        topics = self.own if self.local else list(range(self.n))
        z = sum(self.weights[t] for t in topics)
        return {t: self.weights[t] / z for t in topics}

    def subscription(self, rng: random.Random, k: int) -> list[int]:
        """``k`` distinct topics, sorted (see the module docstring for the law)."""
        if k >= self.n:
            return list(range(self.n))
        if not self.local:
            return _draw_distinct(rng, range(self.n), self.weights, k)
        n_foreign = 1 if (k > 0 and rng.random() < self.foreign_eps) else 0
        n_own = min(k - n_foreign, len(self.own))
        chosen = _draw_distinct(rng, self.own, self.weights, n_own)
        n_foreign = k - n_own  # more slots than own topics: the rest are foreign too
        if n_foreign:
            chosen += rng.sample(self.foreign, n_foreign)
        return sorted(chosen)


def _draw_distinct(rng: random.Random, topics, weights: list[float], k: int) -> list[int]:
    """``k`` distinct topics of ``topics``, sorted, drawn without replacement with
    probabilities proportional to ``weights[topic]`` (Efraimidis-Spirakis)."""
    if k <= 0:
        return []
    keys = []
    for t in topics:
        u = rng.random()
        w = weights[t]
        keys.append((math.log(u) / w if u > 0 and w > 0 else -math.inf, t))
    best = sorted(keys, reverse=True)[:k]
    return sorted(t for _, t in best)


def client_subscriptions(rng: random.Random, pop: Popularity, clients: list[str],
                         k: int) -> dict[str, list[int]]:
    """Every client's initial subscription, in client order, from one rng: the client host
    draws exactly this at start (its rng seeded with the process seed), and the
    timestamp-size analysis (Figs 7-8) re-draws it from the same seed."""
    return {c: pop.subscription(rng, k) for c in clients}


def own_topics(tm: dict, directory: dict, site: str | None) -> list[int] | None:
    """The topics whose TM is hosted at ``site`` (None when no TM server is there)."""
    from testbed.protocols.ordering.nodes.placement import topics_of

    own = [t for s in tm["servers"] if (directory.get(s) or {}).get("site") == site
           for t in topics_of(tm, s)]
    return sorted(own) or None
