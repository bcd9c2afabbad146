"""A trial's FailureConfig on every admitted Ray: preemptions on a budget of their own where Ray Train has one.
Ray Train's FailureConfig is stood in for by either kind, so that both are tested whichever admitted Ray runs them."""

from __future__ import annotations

from dataclasses import dataclass

from tuning.sweep import trainable


@dataclass
class FailureConfigWithPreemptions:
    """FailureConfig as Ray 2.58 on have it: preemptions on a budget of their own."""

    max_failures: int = 0
    max_preemption_failures: int = 0
    controller_failure_limit: int = -1


@dataclass
class OlderFailureConfig:
    """FailureConfig as Ray 2.56 and 2.57 have it: no max_preemption_failures."""

    max_failures: int = 0
    controller_failure_limit: int = -1


def test_a_ray_with_a_preemption_budget_leaves_max_failures_for_real_failures(monkeypatch):
    monkeypatch.setattr(trainable.ray.train, "FailureConfig", FailureConfigWithPreemptions)
    assert trainable.failure_config(3) == FailureConfigWithPreemptions(max_failures=3, max_preemption_failures=-1)


def test_an_older_ray_gets_max_failures_alone(monkeypatch):
    monkeypatch.setattr(trainable.ray.train, "FailureConfig", OlderFailureConfig)
    assert trainable.failure_config(3) == OlderFailureConfig(max_failures=3)
