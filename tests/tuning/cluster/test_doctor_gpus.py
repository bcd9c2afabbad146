"""`mamba-tune doctor` on GPU nodes (tuning/cluster/doctor.py: gpus_ready): a node whose torch cannot use its GPU,
and GPU nodes whose mamba-ssm kernels do not load, fail with the fix; the nodes' facts faked as node_facts gives
them (its nvidia-smi and torch faked where they enter)."""

from __future__ import annotations

import dataclasses

from tests.tuning.cluster.fake_gpu import CU128_TORCH, CU130_TORCH_BLIND, OLD_DRIVER
from tuning.cluster import doctor, node_probe
from tuning.cluster.doctor import gpus_ready
from tuning.cluster.node_probe import PACKAGES

MISSING = "import mamba_ssm: ModuleNotFoundError: No module named 'selective_scan_cuda'"


def node(ip: str, node_id: str, gpus: float) -> dict:
    return {"NodeManagerAddress": ip, "NodeID": node_id, "Resources": {"CPU": 8.0, "GPU": gpus}}


def facts(driver=None, torch=None, kernels_missing="") -> dict:
    return {"kernels_missing": kernels_missing, "driver": dataclasses.asdict(driver) if driver else None,
            "torch_gpu": dataclasses.asdict(torch) if torch else None}


def test_doctor_fails_a_node_whose_torch_sees_no_gpu_naming_both_versions():
    nodes = [node("10.0.0.1", "aaaaaaaa11", 0), node("10.0.0.5", "3b3cf129ff", 1)]
    found = gpus_ready(nodes, [facts(kernels_missing="no CUDA"), facts(OLD_DRIVER, CU130_TORCH_BLIND, "no CUDA")])
    assert len(found) == 1  # the blind node's kernels are not said again; the CPU head's are no problem
    assert found[0].level == "fail"
    assert found[0].text == ("node 10.0.0.5 (3b3cf129): the NVIDIA driver 535.104.05 supports CUDA 12.2, torch "
                             "2.10.0+cu130 is built for CUDA 13.0: torch sees no GPU and would train on the CPU")
    assert found[0].fix.startswith("an NVIDIA driver for CUDA 13 or newer, or the torch of your CUDA")


def test_doctor_fails_gpu_nodes_whose_kernels_do_not_load_with_the_install_fix():
    nodes = [node("10.0.0.1", "aaaaaaaa11", 0), node("10.0.0.5", "3b3cf129ff", 1), node("10.0.0.6", "4c4c4c4cff", 1)]
    ready = dataclasses.replace(CU128_TORCH, kernels_missing=None)  # node_facts does not ask torch_facts for them
    found = gpus_ready(nodes, [facts(kernels_missing=MISSING), facts(OLD_DRIVER, ready, MISSING),
                               facts(OLD_DRIVER, ready)])
    assert [(f.level, f.text) for f in found] == [
        ("fail", f"mamba-ssm's fused kernels do not load on GPU node(s) 10.0.0.5 (3b3cf129) ({MISSING}): GPU trials "
                 "there stop (model.backend auto trains on the GPU with them)")]
    assert found[0].fix.startswith("install them: `make` on a machine with an NVIDIA GPU installs the release wheels "
                                   "(docs/gpus.md, \"Installing the kernels\") there; ")
    assert found[0].fix.endswith("or set model.backend=torch to train on the slower torch path knowingly")


def test_doctor_has_nothing_to_say_of_gpus_that_can_train():
    nodes = [node("10.0.0.5", "3b3cf129ff", 1)]
    ready = dataclasses.replace(CU128_TORCH, kernels_missing=None)
    assert gpus_ready(nodes, [facts(OLD_DRIVER, ready)]) == []


def test_node_facts_carry_the_driver_and_torch_where_nvidia_smi_answers(monkeypatch):
    monkeypatch.setattr(node_probe, "driver_facts", lambda: OLD_DRIVER)
    monkeypatch.setattr(node_probe, "torch_facts", lambda kernels: CU130_TORCH_BLIND if not kernels else None)
    here = node_probe.node_facts()
    assert here["driver"] == dataclasses.asdict(OLD_DRIVER)
    assert here["torch_gpu"] == dataclasses.asdict(CU130_TORCH_BLIND)
    monkeypatch.setattr(node_probe, "driver_facts", lambda: None)
    assert node_probe.node_facts()["driver"] is None and node_probe.node_facts()["torch_gpu"] is None


def versions_fact(torch: str, python: str = "3.11.7", ray: str = "2.60.0") -> dict:
    return {"python": python, "versions": {"ray": ray, "torch": torch}}


def test_doctor_compares_torch_among_nodes_of_a_kind_by_release(monkeypatch):
    """The GPU workers' lock has torch 2.10.0 (the newest with mamba-ssm's release kernels), the head and CPU nodes
    torch 2.13.0: no finding; a GPU node apart from the other GPU nodes, or ray anywhere apart, fails."""
    monkeypatch.setattr(doctor, "node_facts", lambda: {"python": "3.11.7", "kernels_missing": "no CUDA",
                                                       "versions": dict.fromkeys(PACKAGES, "1")})
    nodes = [node("10.0.0.1", "aaaaaaaa11", 0), node("10.0.0.2", "bbbbbbbb22", 0),
             node("10.0.0.5", "3b3cf129ff", 1), node("10.0.0.6", "4c4c4c4cff", 1)]
    agreeing = [versions_fact("2.13.0"), versions_fact("2.13.0+cpu"), versions_fact("2.10.0"), versions_fact("2.10.0")]
    assert [f.level for f in doctor._versions(nodes, agreeing)] == ["ok"]
    apart = [*agreeing[:3], versions_fact("2.9.1", ray="2.59.0")]
    assert [(f.level, f.text) for f in doctor._versions(nodes, apart)][:2] == [
        ("fail", "ray differs between nodes: 2.60.0 on 10.0.0.1 (aaaaaaaa), 10.0.0.2 (bbbbbbbb), 10.0.0.5 (3b3cf129); "
                 "2.59.0 on 10.0.0.6 (4c4c4c4c)"),
        ("fail", "torch differs between GPU nodes: 2.10.0 on 10.0.0.5 (3b3cf129); 2.9.1 on 10.0.0.6 (4c4c4c4c)")]
