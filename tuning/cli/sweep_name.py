"""`mamba-tune sweep --name-from-ray-job`: the sweep named after the Ray job that runs it, so that the same
entrypoint submitted twice (two `kubectl create` of deploy/kuberay/rayjob.yaml) is two sweeps, none refused as a
name in use.

Ray's job supervisor gives the job's driver its submission id in the JSON of RAY_JOB_CONFIG_JSON_ENV_VAR, under
metadata.job_submission_id (ray/dashboard/modules/job/job_supervisor.py); KubeRay (1.4 to 1.7) submits a RayJob with the
id `<RayJob name>-<5 random letters and digits>` (utils.GenerateRayJobId), `ray job submit` without --submission-id
with `raysubmit_<16 letters and digits>`: both names a sweep may have. Read without importing Ray. A job's own
metadata (`ray job submit --metadata-json`, a RayJob's spec.metadata) is laid over Ray's, so a `job_submission_id`
given there names the sweep instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from tuning.errors import UsageError
from tuning.sweep_files import valid_name

JOB_CONFIG = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # ray._private.runtime_env.constants.RAY_JOB_CONFIG_JSON_ENV_VAR
SUBMISSION_ID = "job_submission_id"  # ray.dashboard.modules.job.common.JOB_ID_METADATA_KEY


def ray_job_name(environ: Mapping[str, str] = os.environ) -> str:
    """The submission id of the Ray job this process is the driver of, as a sweep name; UsageError outside one."""
    try:
        job_id = json.loads(environ[JOB_CONFIG])["metadata"][SUBMISSION_ID]
    except (KeyError, TypeError, ValueError):  # no job, or a config without the id
        raise UsageError("--name-from-ray-job: this sweep is not run as a Ray job (no submission id in "
                         f"{JOB_CONFIG}), and the name comes from the job; submit it with `ray job submit` or as "
                         "a RayJob, or give --name") from None
    if not valid_name(job_id):
        raise UsageError(f"--name-from-ray-job: the job's submission id {job_id!r} is no sweep name, which is "
                         "letters, digits, '-' or '_'; submit with such a --submission-id, or give --name")
    return job_id
