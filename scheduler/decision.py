"""What one scheduling decision says (`Decision`), and how it picks among the best-scored nodes
(`select_host`): the types algorithm.py's loop and vectorized.py's arrays both produce. Pure."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .fit import PodContext


@dataclass(frozen=True)
class Decision:
    node: str | None
    reasons: dict[str, list[str]]        # per rejected node: the reasons of the filter that rejected it
    scores: dict[str, int]               # per scored node: its TotalScore
    message: str = ""                    # the FitError text when node is None
    plugins: dict[str, str] = field(default_factory=dict)  # per rejected node: the rejecting plugin
    prefilter_rejected: bool = False     # a PreFilter refused the pod before any node was looked at
    next_start: int = 0                  # where the next decision starts filtering
    context: PodContext | None = None    # the pod as the decision saw it (its requests), for assume()

    @property
    def unschedulable_plugins(self) -> frozenset[str]:
        """The plugins whose rejections made the pod unschedulable: the queue moves it back only on
        cluster events one of them cares about."""
        return frozenset(self.plugins.values())


def select_host(totals: dict[str, int], rng: random.Random | None = None) -> str:
    """The highest TotalScore; a tie is broken uniformly at random (selectHost's reservoir sampling
    gives every tied node the same chance, which is what one choice among them does)."""
    best = max(totals.values())
    tied = [name for name, value in totals.items() if value == best]
    if len(tied) == 1:
        return tied[0]
    return rng.choice(tied) if rng is not None else random.choice(tied)
