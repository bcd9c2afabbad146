"""deploy/kuberay's overlays (eks, gke, local) as `kubectl kustomize` renders them, the objects `kubectl apply -k`
sends: fields KubeRay and Kubernetes keep, every image named with its registry, the site's settings in every Ray
container, a storage class and a cloud identity per overlay, GPU groups on GPU nodes, and a local cluster whose
sweeps keep their storage on the head. Pure file checks: kubectl renders, nothing is applied."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.deploy.kuberay_fields import manifest_unknown_fields, model_unknown_fields
from tests.deploy.kustomize_overlays import KUBERAY, OVERLAYS, has_registry, images, pod_specs, render, rendered
from tuning.cluster.autoscaler import autoscaled_nodes
from tuning.cluster.ray_autoscaler_api import node_types_of_raycluster

GPU = "nvidia.com/gpu"
SETTINGS = "mamba-tune-settings"
MODELS = {"ServiceAccount": "V1ServiceAccount", "ConfigMap": "V1ConfigMap", "PersistentVolumeClaim":
          "V1PersistentVolumeClaim", "Deployment": "V1Deployment", "Service": "V1Service",
          "NetworkPolicy": "V1NetworkPolicy"}
STORAGE_CLASS = {"eks": "gp3", "gke": "standard-rwo", "local": "standard"}
IDENTITY = {"eks": "eks.amazonaws.com/role-arn", "gke": "iam.gke.io/gcp-service-account"}
# The node labels a GPU group may ask for: NVIDIA's GPU feature discovery's, Karpenter's and EKS Auto Mode's, the
# cluster autoscaler's AWS GPU label, GKE's
GPU_LABELS = {"base": {"nvidia.com/gpu.present"}, "local": {"nvidia.com/gpu.present"},
              "eks": {"karpenter.k8s.aws/instance-gpu-manufacturer", "eks.amazonaws.com/instance-gpu-manufacturer",
                      "k8s.amazonaws.com/accelerator"},
              "gke": {"cloud.google.com/gke-accelerator"}}


def cluster_of(overlay: str) -> dict:
    return rendered(overlay)["RayCluster", "mamba-tune"]


def gpu_groups(cluster: dict) -> dict[str, dict]:
    return {name: spec for name, spec in pod_specs(cluster).items()
            if any(GPU in c.get("resources", {}).get("limits", {}) for c in spec["containers"])}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_has_only_fields_kubernetes_and_kuberay_keep(overlay):
    objects = rendered(overlay)
    assert {kind for kind, _ in objects} <= {"RayCluster", *MODELS}, "a kind this test does not check yet"
    for (kind, name), doc in objects.items():
        found = manifest_unknown_fields(doc) if kind == "RayCluster" else model_unknown_fields(doc, MODELS[kind], kind)
        assert found == [], (kind, name)
        assert doc["metadata"]["namespace"] == "mamba-tune", (kind, name)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_image_names_its_registry(overlay):
    found = [image for doc in rendered(overlay).values() for image in images(doc)]
    assert found and all(has_registry(image) for image in found), found
    cluster = cluster_of(overlay)
    for name, spec in pod_specs(cluster).items():  # the CUDA image where a GPU is, the CPU one elsewhere
        tag = "cuda" if name in gpu_groups(cluster) else "cpu"
        assert all(c["image"].endswith(f"/mamba-tune:{tag}") for c in spec["containers"]), name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_sites_settings_reach_every_ray_container(overlay):
    objects = rendered(overlay)
    settings = objects["ConfigMap", SETTINGS]["data"]  # the name as the pods name it: no hash suffix
    assert {"MAMBA_TUNE_STORAGE", "MLFLOW_TRACKING_URI", "MLFLOW_ARTIFACTS_DESTINATION",
            "MLFLOW_BACKEND_STORE_URI"} <= set(settings)
    for name, spec in pod_specs(cluster_of(overlay)).items():
        for container in spec["containers"]:
            sources = [source["configMapRef"]["name"] for source in container.get("envFrom", [])
                       if "configMapRef" in source]
            assert SETTINGS in sources, (name, container["name"])
    mlflow = pod_specs(objects["Deployment", "mlflow"])["mlflow"]["containers"][0]
    read = {var["valueFrom"]["configMapKeyRef"]["key"] for var in mlflow.get("env", [])
            if "configMapKeyRef" in var.get("valueFrom", {})}
    assert read and read <= set(settings)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_heads_volume_has_the_overlays_storage_class(overlay):
    claim = rendered(overlay)["PersistentVolumeClaim", "mamba-tune-head"]
    assert claim["spec"]["storageClassName"] == STORAGE_CLASS[overlay]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_runs_as_the_service_account_the_cloud_identity_is_on(overlay):
    objects = rendered(overlay)
    annotations = objects["ServiceAccount", "mamba-tune"]["metadata"].get("annotations", {})
    assert (list(annotations) == [IDENTITY[overlay]]) if overlay in IDENTITY else not annotations
    for doc in (cluster_of(overlay), objects["Deployment", "mlflow"]):
        for name, spec in pod_specs(doc).items():
            assert spec["serviceAccountName"] == "mamba-tune", name


def node_label_keys(spec: dict) -> set[str]:
    """The labels a pod's required node affinity asks for, every term of it (a node matching any one will do)."""
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms and all(term["matchExpressions"] for term in terms)
    return {expression["key"] for term in terms for expression in term["matchExpressions"]}


@pytest.mark.parametrize("overlay", [*OVERLAYS, "base"])
def test_gpu_groups_ask_for_a_gpu_node_and_tolerate_its_taint(overlay):
    cluster = cluster_of(overlay) if overlay != "base" else base_cluster()
    groups = gpu_groups(cluster)
    assert set(groups) == {"gpu-1x", "gpu-4x"}
    for name, spec in groups.items():
        assert {"key": GPU, "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"], name
        assert node_label_keys(spec) == GPU_LABELS[overlay], name
    for name, spec in pod_specs(cluster).items():
        if name not in groups:  # the head and the CPU group stay off GPU nodes' labels
            assert "affinity" not in spec and "tolerations" not in spec, name


def base_cluster() -> dict:
    """The base's RayCluster as written: the GPU nodes' label an overlay of one's own starts from."""
    documents = yaml.safe_load_all((KUBERAY / "base" / "raycluster.yaml").read_text())
    return next(doc for doc in documents if doc and doc["kind"] == "RayCluster")


@pytest.mark.parametrize("overlay", ["eks", "gke"])
def test_cloud_overlays_keep_sweeps_in_their_bucket_and_scale_gpu_groups_from_zero(overlay):
    settings = rendered(overlay)["ConfigMap", SETTINGS]["data"]
    scheme = {"eks": "s3://", "gke": "gs://"}[overlay]
    assert settings["MAMBA_TUNE_STORAGE"].startswith(scheme)
    assert settings["MLFLOW_ARTIFACTS_DESTINATION"].startswith(scheme)
    if overlay == "gke":  # Cloud Storage through pyarrow's file system, as the sweep and Ray Tune open a storage
        import pyarrow.fs

        assert type(pyarrow.fs.FileSystem.from_uri(settings["MAMBA_TUNE_STORAGE"])[0]).__name__ == "GcsFileSystem"
    cluster = cluster_of(overlay)
    assert cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    live = {**cluster, "metadata": {**cluster["metadata"], "namespace": "mamba-tune"}}
    assert sum(node.get("GPU", 0) for node in autoscaled_nodes(node_types_of_raycluster(live))) == 8 * 1 + 2 * 4


def test_local_overlay_is_one_cpu_node_that_keeps_sweeps_on_the_heads_volume():
    cluster = cluster_of("local")
    settings = rendered("local")["ConfigMap", SETTINGS]["data"]
    head = cluster["spec"]["headGroupSpec"]
    container = head["template"]["spec"]["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    # runs/sweeps of the head's working folder: its volume
    assert f"{container['workingDir']}/{settings['MAMBA_TUNE_STORAGE']}".startswith(mounts["head-runs"] + "/")
    assert "num-cpus" not in head["rayStartParams"]  # the trials run on the head, on the CPUs of its limit
    assert GPU not in container["resources"]["limits"]
    # What the sweep reads of the cluster (tuning/cluster/shared_storage.py): no worker node can come, so a folder
    # every node sees is the head's own
    live = {**cluster, "metadata": {**cluster["metadata"], "namespace": "mamba-tune"}}
    assert autoscaled_nodes(node_types_of_raycluster(live)) == []


def test_the_pull_secret_component_reaches_every_pod(tmp_path):
    """An overlay of one's own: the shipped eks one and the component, as docs/kubernetes.md has it added."""
    shutil.copytree(KUBERAY, tmp_path / "kuberay")
    mine = tmp_path / "kuberay" / "overlays" / "mysite"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": ["../eks"], "components": ["../../components/pull-secret"]}))
    objects = {(doc["kind"], doc["metadata"]["name"]): doc for doc in render(mine)}
    secret = [{"name": "mamba-tune-pull"}]
    assert objects["ServiceAccount", "mamba-tune"]["imagePullSecrets"] == secret  # the Ray pods' account
    assert objects["ServiceAccount", "default"]["imagePullSecrets"] == secret  # a RayJob's submitter's (no account)
    assert objects["Deployment", "mlflow"]["spec"]["template"]["spec"]["imagePullSecrets"] == secret
    assert "imagePullSecrets" not in rendered("eks")["ServiceAccount", "mamba-tune"]  # only where added
