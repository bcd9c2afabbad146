"""gpus_per_trial against the cluster's GPUs, before a sweep plans its trials (tuning/cli/sweep_gpus.py: settle_gpus)."""

from __future__ import annotations

import pytest

from tests.tuning.sweeps import space_values
from tuning.cli.sweep_gpus import settle_gpus
from tuning.errors import UsageError
from tuning.search.space import parse_space


def settle(gpus_per_trial, cluster_gpus: float, local: bool = True):
    values = space_values(resources={"gpus_per_trial": gpus_per_trial})
    return settle_gpus(values, parse_space(values, "s.yaml"), cluster_gpus, "s.yaml", local=local)


def test_auto_without_a_gpu_anywhere_runs_on_cpus_and_says_so(capsys):
    values, space = settle("auto", 0)
    assert values["resources"]["gpus_per_trial"] == 0 and space.resources.gpus_per_trial == 0
    assert space.run.train.device == "cpu"
    out, err = capsys.readouterr()
    assert out == ("resources: gpus_per_trial auto, and no node of this cluster has a GPU or can launch one: "
                   "trials run on CPUs\n") and err == ""


def test_auto_without_a_gpu_on_a_cluster_joined_is_refused_with_both_fixes(capsys):
    with pytest.raises(UsageError, match=r"no node of this cluster has a GPU nor does its autoscaler .* set "
                       r"resources.gpus_per_trial: 0 .* or give the autoscaler a GPU node group"):
        settle("auto", 0, local=False)
    assert capsys.readouterr() == ("", "")  # nothing said before the refusal
    assert settle("auto", 2, local=False)[0]["resources"]["gpus_per_trial"] == "auto"  # GPUs there or to come


def test_auto_with_gpus_keeps_auto_for_the_memory_probe(capsys):
    values, space = settle("auto", 4)
    assert values["resources"]["gpus_per_trial"] == "auto" and space.run.train.device == "cuda"
    assert capsys.readouterr() == ("", "")


def test_no_gpu_asked_on_a_cluster_with_gpus_is_one_warning_line(capsys):
    values, space = settle(0, 8)
    assert values["resources"]["gpus_per_trial"] == 0 and space.run.train.device == "cpu"
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("warning: resources.gpus_per_trial is 0 and this cluster has 8 GPU(s) or can launch them: "
                          "trials run on CPUs and leave the GPUs idle; set gpus_per_trial to auto")
    assert settle(0.5, 8)[0]["resources"]["gpus_per_trial"] == 0.5 and capsys.readouterr() == ("", "")
