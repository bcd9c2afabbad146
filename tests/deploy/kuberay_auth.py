"""KubeRay 1.7's token authentication, as a model: for a RayCluster with `authOptions: {mode: token}`, the containers
the operator runs and the `env` it gives each, and the header its own dashboard client sends. Tests run those
containers' commands here with exactly that environment (pod_env.container_env builds it as the kubelet does).

Taken from ray-project/kuberay at tag v1.7.0, ray-operator/controllers/ray/:
- utils/util.go IsAuthEnabled (authOptions.mode == "token"); IsK8sAuthEnabled (enableK8sTokenAuth: Kubernetes' own
  tokens instead of a secret) is not modelled, and `operator_containers` refuses a cluster that turns it on.
- common/pod.go SetContainerTokenAuthEnvVars: appends RAY_AUTH_MODE=token, then RAY_AUTH_TOKEN from the secret
  authOptions.secretName (else the one KubeRay makes, named after the cluster: CheckName), key auth_token
  (utils/constant.go RAY_AUTH_TOKEN_SECRET_KEY), each only where the container has no variable of that name.
- common/pod.go configureTokenAuth: the Ray container (the pod's first) of the head and of every worker, and the
  worker's wait-gcs-ready init container, which DefaultWorkerPodTemplate makes with a copy of the Ray container's
  `env` (not its envFrom) before the token is added.
- common/pod.go DefaultHeadPodTemplate: the autoscaler sidecar (BuildAutoscalerContainer's own variables, the
  token, then autoscalerOptions.env appended by mergeAutoscalerOverrides).
- rayjob_controller.go getSubmitterTemplate, configureSubmitterContainer: the RayJob's submitter, common/job.go
  GetDefaultSubmitterContainer (named ray-job-submitter, the head's image) unless the RayJob has a
  submitterPodTemplate, then PYTHONUNBUFFERED, RAY_DASHBOARD_ADDRESS, RAY_JOB_SUBMISSION_ID and the token of the
  RayCluster that clusterSelector names.
- utils/util.go GetRayDashboardClientFunc and utils/dashboardclient/dashboard_httpclient.go setAuthHeader: the
  operator reads the secret's auth_token and sends `x-ray-authorization: Bearer TOKEN` on every Jobs API call
  (GetJobInfo to follow a RayJob, StopJob when it is deleted).
"""

from __future__ import annotations

import copy

MODE, TOKEN = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"
SECRET_KEY = "auth_token"
OPERATOR_HEADER = "x-ray-authorization"
# BuildAutoscalerContainer's own env (its fieldRefs: a test gives the pod's fields, pod_env.container_env)
_AUTOSCALER_ENV = [{"name": "RAY_CLUSTER_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray.io/cluster']"}}},
                   {"name": "RAY_CLUSTER_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                   {"name": "RAY_HEAD_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                   {"name": "KUBERAY_CRD_VER", "value": "v1"},
                   {"name": "KUBERAY_GEN_AUTOSCALER_START_CMD", "value": "ray kuberay-autoscaler --cluster-name "
                    "$(RAY_CLUSTER_NAME) --cluster-namespace $(RAY_CLUSTER_NAMESPACE)"}]


def ray_container(group: dict) -> dict:
    """The group's Ray container: KubeRay's is the pod's first (utils.RayContainerIndex)."""
    return group["template"]["spec"]["containers"][0]


def auth_enabled(cluster: dict) -> bool:
    return cluster["spec"].get("authOptions", {}).get("mode") == "token"


def token_secret(cluster: dict) -> str:
    """The secret the operator takes the token from."""
    return cluster["spec"]["authOptions"].get("secretName") or cluster["metadata"]["name"]


def with_token(spec: dict, cluster: dict) -> dict:
    """The container as SetContainerTokenAuthEnvVars leaves it: a variable it already has is kept as written."""
    done = copy.deepcopy(spec)
    env = done.setdefault("env", [])
    have = {var["name"] for var in env}
    if MODE not in have:
        env.append({"name": MODE, "value": "token"})
    if TOKEN not in have:
        env.append({"name": TOKEN, "valueFrom": {"secretKeyRef": {"name": token_secret(cluster), "key": SECRET_KEY}}})
    return done


def operator_containers(cluster: dict, job: dict | None = None, dashboard: str = "", job_id: str = "") -> dict[str, dict]:
    """Each container the operator runs for the cluster (and the RayJob's submitter), by a name saying where it is:
    "head", "autoscaler", GROUP, "GROUP wait-gcs-ready", "submitter"; each with its image and env."""
    spec = cluster["spec"]
    assert not spec.get("authOptions", {}).get("enableK8sTokenAuth"), "Kubernetes token auth is not modelled"
    auth = (lambda c: with_token(c, cluster)) if auth_enabled(cluster) else copy.deepcopy
    head = ray_container(spec["headGroupSpec"])
    found = {"head": auth(head)}
    if spec.get("enableInTreeAutoscaling"):
        sidecar = auth({"name": "autoscaler", "image": head["image"], "env": copy.deepcopy(_AUTOSCALER_ENV)})
        sidecar["env"] += copy.deepcopy(spec.get("autoscalerOptions", {}).get("env", []))
        found["autoscaler"] = sidecar
    for group in spec.get("workerGroupSpecs", []):
        ray = ray_container(group)
        found[group["groupName"]] = auth(ray)
        init = {"name": "wait-gcs-ready", "image": ray["image"], "env": copy.deepcopy(ray.get("env", []))}
        found[f"{group['groupName']} wait-gcs-ready"] = auth(init)
    if job is not None:
        template = job["spec"].get("submitterPodTemplate")
        submitter = (copy.deepcopy(template["spec"]["containers"][0]) if template
                     else {"name": "ray-job-submitter", "image": head["image"]})
        submitter.setdefault("env", []).extend([{"name": "PYTHONUNBUFFERED", "value": "1"},
                                                {"name": "RAY_DASHBOARD_ADDRESS", "value": dashboard},
                                                {"name": "RAY_JOB_SUBMISSION_ID", "value": job_id}])
        found["submitter"] = auth(submitter)
    return found


def operator_headers(token: str) -> dict[str, str]:
    """The headers KubeRay 1.7's dashboard client adds to a Jobs API call on a cluster with token auth."""
    return {OPERATOR_HEADER: f"Bearer {token}"}
