"""deploy/kuberay's RayCluster and RayJob as the base's files write them, parsed once a module (a test that breaks
one does so on a copy)."""

from __future__ import annotations

import pytest

from tests.deploy.kuberay_manifests import documents


@pytest.fixture(scope="module")
def cluster() -> dict:
    return documents("base/raycluster.yaml")["RayCluster"]


@pytest.fixture(scope="module")
def job() -> dict:
    return documents("rayjob.yaml")["RayJob"]
