"""`mamba-tune sweep --name-from-ray-job`: the sweep named after the Ray job that runs it, read where Ray's job
supervisor puts it; refused, in one line, outside a job and beside --name. A real job submitted twice:
tests/cluster/test_job_submit.py."""

from __future__ import annotations

import json

import pytest

from tests.cli import assert_one_line_error, cli_env, run_cli
from tuning.cli.sweep_name import JOB_CONFIG, SUBMISSION_ID, ray_job_name
from tuning.errors import UsageError

# deploy/kuberay/rayjob.yaml's generateName, KubeRay's name suffix, then GenerateRayJobId's own 5 characters
KUBERAY_JOB_ID = "mamba-tune-sweep-x7k2q-b4c5d"


def job_config(submission_id: object) -> str:
    """RAY_JOB_CONFIG_JSON_ENV_VAR as Ray's job supervisor writes it for its driver (_get_driver_env_vars)."""
    return json.dumps({"runtime_env": {}, "metadata": {SUBMISSION_ID: submission_id, "job_name": submission_id}})


def test_the_names_read_are_those_ray_writes():
    from ray._private.runtime_env.constants import RAY_JOB_CONFIG_JSON_ENV_VAR
    from ray.dashboard.modules.job.common import JOB_ID_METADATA_KEY

    assert (JOB_CONFIG, SUBMISSION_ID) == (RAY_JOB_CONFIG_JSON_ENV_VAR, JOB_ID_METADATA_KEY)


@pytest.mark.parametrize("submission_id", [KUBERAY_JOB_ID, "raysubmit_qVtGfXW6mgR3jTme"])  # KubeRay's; Ray's own
def test_a_jobs_submission_id_is_the_sweeps_name(submission_id):
    assert ray_job_name({JOB_CONFIG: job_config(submission_id)}) == submission_id


@pytest.mark.parametrize("environ", [{}, {JOB_CONFIG: "{}"}, {JOB_CONFIG: "not json"},
                                     {JOB_CONFIG: json.dumps({"metadata": None})}])
def test_outside_a_job_there_is_no_name(environ):
    with pytest.raises(UsageError, match="not run as a Ray job"):
        ray_job_name(environ)


@pytest.mark.parametrize("submission_id", ["../elsewhere", "", 7])
def test_a_submission_id_that_is_no_sweep_name_is_refused(submission_id):
    with pytest.raises(UsageError, match="is no sweep name"):
        ray_job_name({JOB_CONFIG: job_config(submission_id)})


def test_the_sweep_outside_a_job_is_refused_in_one_line(tmp_path):
    done = run_cli("sweep", "--data", tmp_path / "bars.parquet", "--space", "smoke", "--name-from-ray-job",
                   cwd=tmp_path)
    assert_one_line_error(done, "--name-from-ray-job: this sweep is not run as a Ray job")
    assert not (tmp_path / "runs").exists()


def test_the_job_name_and_name_together_are_refused_in_one_line(tmp_path):
    done = run_cli("sweep", "--data", tmp_path / "bars.parquet", "--space", "smoke", "--name", "a",
                   "--name-from-ray-job", cwd=tmp_path)
    assert_one_line_error(done, "argument --name-from-ray-job: not allowed with argument --name")


def test_the_sweep_in_a_job_goes_by_the_jobs_name(tmp_path):
    """A sweep of that name already there: the refusal names the job's id, so the sweep took it as its name."""
    (tmp_path / "runs" / "sweeps" / KUBERAY_JOB_ID).mkdir(parents=True)
    (tmp_path / "runs" / "sweeps" / KUBERAY_JOB_ID / "sweep.json").write_text("{}")
    (tmp_path / "bars.parquet").write_bytes(b"")
    done = run_cli("sweep", "--data", tmp_path / "bars.parquet", "--space", "smoke", "--name-from-ray-job",
                   cwd=tmp_path, env=cli_env(**{JOB_CONFIG: job_config(KUBERAY_JOB_ID)}))
    assert_one_line_error(done, f"a sweep named '{KUBERAY_JOB_ID}' already exists")
