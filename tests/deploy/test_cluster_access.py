"""Who may talk to the cluster, as the manifests say it: Ray's token authentication through the RayCluster's
`authOptions` (KubeRay 1.7 gives every container it runs the token from the secret mamba-tune-ray-token: the
head, each worker group and its init container, the autoscaler, the RayJob's submitter), and NetworkPolicies that
admit the Ray pods' ports and the MLflow server's only from pods of the namespace (and the Jobs API from the KubeRay
operator). Pure file checks, against KubeRay's types and Kubernetes' models; test_cluster_access_live.py runs a head
with the environment the operator gives its containers."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.deploy.kuberay_auth import MODE, SECRET_KEY, TOKEN, auth_enabled, operator_containers
from tests.deploy.kuberay_fields import model_unknown_fields
from tests.deploy.kuberay_manifests import KUBERAY, groups
from tests.deploy.kustomize_overlays import OVERLAYS, has_registry, rendered

SECRET = "mamba-tune-ray-token"
TOKEN_ENV = [{"name": MODE, "value": "token"},
             {"name": TOKEN, "valueFrom": {"secretKeyRef": {"name": SECRET, "key": SECRET_KEY}}}]
# The KubeRay operator's pods, as its helm chart (v1.7.0, helm-chart/kuberay-operator: nameOverride kuberay-operator,
# the Deployment's pod labels app.kubernetes.io/name) labels them, in the namespace docs/kubernetes.md installs it in
OPERATOR = ({"kubernetes.io/metadata.name": "ray-system"}, {"app.kubernetes.io/name": "kuberay-operator"})
# Ports a Ray pod listens on: GCS, dashboard and Jobs API, client server, metrics, the dashboard agent, and some Ray
# picks at random (object and node managers, the workers' 10002-19999 range, agents' gRPC ports)
RAY_PORTS = [6379, 8265, 10001, 8080, 52365, 10002, 19999, 33333, 61000]
TOKEN_MIN_RAY = (2, 52)  # KubeRay 1.7 refuses authOptions.mode token below it (utils/validation.go)


@pytest.fixture(scope="module")
def policies() -> list[dict]:
    return [doc for doc in yaml.safe_load_all((KUBERAY / "base" / "network-policy.yaml").read_text()) if doc]


FAIL_CLOSED = {"name": MODE, "value": "token"}  # written on the Ray containers: see test_ray_containers_fail_closed


def written_auth_env(cluster: dict, job: dict) -> list[str]:
    """Every place the manifests themselves set a RAY_AUTH_ variable (env and autoscalerOptions.env), but the
    RAY_AUTH_MODE=token that the Ray containers write to fail closed."""
    def walk(data, path):
        if isinstance(data, dict):
            if (str(data.get("name", "")).startswith("RAY_AUTH_") and ("value" in data or "valueFrom" in data)
                    and data != FAIL_CLOSED):
                yield path
            for key, value in data.items():
                yield from walk(value, f"{path}.{key}")
        elif isinstance(data, list):
            for i, item in enumerate(data):
                yield from walk(item, f"{path}[{i}]")
    return [*walk(cluster, "RayCluster"), *walk(job, "RayJob")]


def test_cluster_turns_on_token_auth_from_the_secret(cluster):
    assert cluster["spec"]["authOptions"] == {"mode": "token", "secretName": SECRET}
    assert auth_enabled(cluster)
    version = tuple(int(part) for part in cluster["spec"]["rayVersion"].split(".")[:2])
    assert version >= TOKEN_MIN_RAY, cluster["spec"]["rayVersion"]


def test_operator_gives_every_caller_the_token_from_the_secret(cluster, job):
    callers = operator_containers(cluster, job)
    expected = {"head", "autoscaler", "submitter", *groups(cluster), *(f"{g} wait-gcs-ready" for g in groups(cluster))}
    assert set(callers) == expected  # the autoscaler runs (and reads the GCS); every worker waits on the GCS
    for name, spec in callers.items():
        auth = [var for var in spec["env"] if var["name"].startswith("RAY_AUTH_")]
        assert auth == TOKEN_ENV, name
        assert [model_unknown_fields(var, "V1EnvVar", name) for var in spec["env"]] == [[]] * len(spec["env"])


def test_no_container_sets_the_token_itself(cluster, job):
    """One source, the operator: a RAY_AUTH_ variable written in a manifest would be kept as written (KubeRay adds
    its own only where a container has none), so a token from another secret would win, unseen."""
    assert written_auth_env(cluster, job) == []
    # what would happen: a worker's hand-written token stays, in the worker and its init container
    broken = copy.deepcopy(cluster)
    stale = {"name": TOKEN, "valueFrom": {"secretKeyRef": {"name": "old-token", "key": "token"}}}
    broken["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"] = [stale]
    assert written_auth_env(broken, job) == ["RayCluster.spec.workerGroupSpecs[0].template.spec.containers[0].env[0]"]
    name = broken["spec"]["workerGroupSpecs"][0]["groupName"]
    for where in (name, f"{name} wait-gcs-ready"):
        assert stale in operator_containers(broken, job)[where]["env"], where


def test_ray_containers_fail_closed_where_the_operator_drops_authoptions(cluster):
    """An operator older than 1.6, or a CRD that `helm upgrade` left old, prunes authOptions without a word: the Ray
    containers' own RAY_AUTH_MODE=token then makes `ray start` refuse to run without a token (test_cluster_access_live),
    rather than the cluster running open. With authOptions the operator keeps it and adds the token."""
    rays = {"head": cluster["spec"]["headGroupSpec"], **groups(cluster)}
    for name, group in rays.items():
        (ray,) = group["template"]["spec"]["containers"]
        assert FAIL_CLOSED in ray["env"], name
    pruned = copy.deepcopy(cluster)
    del pruned["spec"]["authOptions"]
    for name, spec in operator_containers(pruned).items():
        if name in rays:
            assert [var for var in spec["env"] if var["name"].startswith("RAY_AUTH_")] == [FAIL_CLOSED], name


def test_rayjob_uses_kuberays_default_submitter(job):
    """KubeRay 1.7's default submitter gets the token from the cluster's authOptions: no template of one's own (and
    so no image in rayjob.yaml: test_kuberay_manifests.py)."""
    assert "submitterPodTemplate" not in job["spec"]
    assert job["spec"]["submissionMode"] == "K8sJobMode"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_submitter_runs_the_heads_image_the_overlay_names(job, overlay):
    cluster = rendered(overlay)["RayCluster", "mamba-tune"]
    submitter = operator_containers(cluster, job)["submitter"]
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert submitter["image"] == head["image"] and has_registry(submitter["image"]), submitter["image"]
    assert cluster["spec"]["authOptions"] == {"mode": "token", "secretName": SECRET}  # no overlay drops it


def selects(selector: dict, labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "this check reads matchLabels only"
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def peer_admitted(peer: dict, source: tuple[dict | None, dict]) -> bool:
    """`source`: (None, pod labels) for a pod of the policy's namespace, or (namespace labels, pod labels)."""
    namespace, pod = source
    assert "ipBlock" not in peer, "an ipBlock would admit addresses from anywhere"
    if "namespaceSelector" not in peer:
        return namespace is None and selects(peer.get("podSelector", {}), pod)
    return (namespace is not None and selects(peer["namespaceSelector"], namespace)
            and selects(peer.get("podSelector", {}), pod))


def admitted(policies: list[dict], pod: dict[str, str], port: int, source: tuple[dict | None, dict]) -> bool:
    """Whether a TCP connection from `source` to `port` of a pod labelled `pod` (in the policies' namespace) is let in."""
    isolating = [p["spec"] for p in policies if selects(p["spec"]["podSelector"], pod)]
    if not any("Ingress" in spec["policyTypes"] for spec in isolating):
        return True  # a pod no policy selects for ingress takes every connection
    return any((not rule.get("ports") or any(p["port"] == port and p.get("protocol", "TCP") == "TCP"
                                             for p in rule["ports"]))
               and (not rule.get("from") or any(peer_admitted(peer, source) for peer in rule["from"]))
               for spec in isolating for rule in spec.get("ingress", []))


def test_network_policies_pass_kubernetes_models(policies):
    assert [doc["kind"] for doc in policies] == ["NetworkPolicy", "NetworkPolicy"]
    for doc in policies:
        assert model_unknown_fields(doc, "V1NetworkPolicy", doc["metadata"]["name"]) == []
    listed = yaml.safe_load((KUBERAY / "base" / "kustomization.yaml").read_text())["resources"]
    assert "network-policy.yaml" in listed


@pytest.mark.parametrize("node", ["head", "worker"])
def test_ray_pods_admit_the_namespace_only(policies, cluster, node):
    pod = {"ray.io/cluster": cluster["metadata"]["name"], "ray.io/node-type": node}  # KubeRay's labels on its pods
    here = [(None, {}), (None, {"ray.io/cluster": "mamba-tune"}), (None, {"job-name": "mamba-tune-sweep-x"})]
    elsewhere = [({"kubernetes.io/metadata.name": "default"}, {}), (OPERATOR[0], {}), (OPERATOR[0], {"app": "x"}),
                 ({"kubernetes.io/metadata.name": "other"}, OPERATOR[1])]
    for port in RAY_PORTS:
        assert all(admitted(policies, pod, port, source) for source in here), port
        assert not any(admitted(policies, pod, port, source) for source in elsewhere), port
        # the operator reads and stops RayJobs' jobs through the Jobs API, and reaches nothing else
        assert admitted(policies, pod, port, OPERATOR) == (port == 8265), port


def test_mlflow_admits_the_namespace_only(policies):
    mlflow = [doc for doc in yaml.safe_load_all((KUBERAY / "base" / "mlflow.yaml").read_text())
              if doc and doc["kind"] == "Deployment"]
    (deployment,) = mlflow
    pod = deployment["spec"]["template"]["metadata"]["labels"]
    (port,) = {p["containerPort"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
    assert port == 5000
    assert admitted(policies, pod, port, (None, {})) and admitted(policies, pod, port, (None, {"ray.io/cluster": "x"}))
    for source in [({"kubernetes.io/metadata.name": "default"}, {}), OPERATOR]:
        assert not admitted(policies, pod, port, source)
    assert not admitted(policies, pod, 8265, (None, {}))  # its own port only
