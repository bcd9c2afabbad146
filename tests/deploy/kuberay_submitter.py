"""KubeRay 1.7's RayJob submitter and wait-gcs-ready init container, as text: the commands its pods run, for a test
to run them here with the environment the operator gives those pods (kuberay_auth.operator_containers).

Taken from ray-project/kuberay at tag v1.7.0, ray-operator/controllers/ray/: common/job.go BuildJobSubmitCommand
(K8sJobMode: wait until the dashboard's /api/gcs_healthz answers, in Python's urllib (utils/constant.go
BasePythonHealthCommand, RayDashboardGCSHealthCheckTimeoutSeconds 10); then `ray job status`, else `ray job submit
--no-wait`; then `ray job logs --follow`; the words joined by spaces, the runtime env's JSON and the wait message
quoted by Go's strconv.Quote), rayjob_controller.go configureSubmitterContainer (that line under `/bin/bash -ce --`,
utils.GetContainerCommand), and common/pod.go DefaultWorkerPodTemplate (the init container wait-gcs-ready loops on
`ray health-check --address HEAD:6379`).
"""

from __future__ import annotations

import json

GCS_HEALTH_TIMEOUT_S = 10  # utils.RayDashboardGCSHealthCheckTimeoutSeconds
_PYTHON_HEALTH = ('python -c "import urllib.request; r=urllib.request.urlopen(\'{url}\', timeout={timeout}); '
                  "exit(0 if b'success' in r.read() else 1)\"")


def submitter_command(dashboard_url: str, job_id: str, entrypoint: str, runtime_env: dict | None = None) -> list[str]:
    """The submitter container's command for a RayJob (K8sJobMode) on the cluster whose dashboard is `dashboard_url`
    (http://HOST:PORT, the RayJob's status.dashboardURL)."""
    health = _PYTHON_HEALTH.format(url=f"{dashboard_url}/api/gcs_healthz", timeout=GCS_HEALTH_TIMEOUT_S)
    wait = ["until", health, ">/dev/null", "2>&1", ";", "do", "echo",
            json.dumps(f"Waiting for Ray Dashboard GCS to become healthy at {dashboard_url} ..."), ";",
            "sleep", "2", ";", "done", ";"]
    submit = ["ray", "job", "submit", "--address", dashboard_url, "--no-wait"]
    if runtime_env:  # YAML to JSON as sigs.k8s.io/yaml writes it: keys sorted, no spaces
        submit += ["--runtime-env-json", json.dumps(json.dumps(runtime_env, separators=(",", ":"), sort_keys=True))]
    words = [*wait, "if", "!", "ray", "job", "status", "--address", dashboard_url, job_id, ">/dev/null", "2>&1", ";",
             "then", *submit, "--submission-id", job_id, "--", entrypoint, ";", "fi", ";",
             "ray", "job", "logs", "--address", dashboard_url, "--follow", job_id]
    return ["/bin/bash", "-ce", "--", " ".join(words)]


def wait_gcs_ready_check(gcs_address: str) -> list[str]:
    """One try of the init container's loop: exit 0 once the GCS answers."""
    return ["ray", "health-check", "--address", gcs_address]
