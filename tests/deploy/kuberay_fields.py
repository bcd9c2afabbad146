"""The KubeRay v1 fields deploy/kuberay relies on, as KubeRay's Go types name them (their json tags), and a check that
a manifest uses no other: the CRD prunes an unknown field without a word, so a misspelt `minReplica` would leave
a group at its default and nothing would say so.

Taken from ray-project/kuberay, ray-operator/apis/ray/v1/raycluster_types.go (RayClusterSpec, HeadGroupSpec,
WorkerGroupSpec, AutoscalerOptions) and ray-operator/apis/ray/v1/rayjob_types.go (RayJobSpec, SubmitterConfig),
the fields KubeRay 1.4 has. Pod templates are Kubernetes' own: the `kubernetes` client's models check them.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import ApiClient

# A field's value: a table of fields (dict), free-form keys (MAP: rayStartParams, labels), a list of tables
# ([dict]), a Kubernetes model by name ("V1PodTemplateSpec"), or a plain value (None).
MAP = "map"

AUTOSCALER_OPTIONS = {"resources": "V1ResourceRequirements", "image": None, "imagePullPolicy": None,
                      "securityContext": "V1SecurityContext", "idleTimeoutSeconds": None, "upscalingMode": None,
                      "env": None, "envFrom": None, "volumeMounts": None}
HEAD_GROUP_SPEC = {"template": "V1PodTemplateSpec", "headService": "V1Service", "enableIngress": None,
                   "rayStartParams": MAP, "serviceType": None}
WORKER_GROUP_SPEC = {"suspend": None, "groupName": None, "replicas": None, "minReplicas": None, "maxReplicas": None,
                     "idleTimeoutSeconds": None, "rayStartParams": MAP, "template": "V1PodTemplateSpec",
                     "scaleStrategy": {"workersToDelete": None}, "numOfHosts": None}
RAY_CLUSTER_SPEC = {"suspend": None, "managedBy": None, "autoscalerOptions": AUTOSCALER_OPTIONS,
                    "headServiceAnnotations": MAP, "enableInTreeAutoscaling": None, "gcsFaultToleranceOptions": None,
                    "headGroupSpec": HEAD_GROUP_SPEC, "rayVersion": None, "workerGroupSpecs": [WORKER_GROUP_SPEC]}
RAY_JOB_SPEC = {"activeDeadlineSeconds": None, "backoffLimit": None, "rayClusterSpec": RAY_CLUSTER_SPEC,
                "submitterPodTemplate": "V1PodTemplateSpec", "metadata": MAP, "clusterSelector": MAP,
                "submitterConfig": {"backoffLimit": None}, "managedBy": None, "deletionPolicy": None,
                "entrypoint": None, "runtimeEnvYAML": None, "jobId": None, "submissionMode": None,
                "entrypointResources": None, "entrypointNumCpus": None, "entrypointNumGpus": None,
                "ttlSecondsAfterFinished": None, "shutdownAfterJobFinishes": None, "suspend": None}
# A whole object: its kind's spec, and Kubernetes' own ObjectMeta.
OBJECT = {"apiVersion": None, "kind": None, "metadata": "V1ObjectMeta"}
KINDS = {("ray.io/v1", "RayCluster"): {**OBJECT, "spec": RAY_CLUSTER_SPEC},
         ("ray.io/v1", "RayJob"): {**OBJECT, "spec": RAY_JOB_SPEC}}


def model_unknown_fields(data: Any, model: str, path: str) -> list[str]:
    """The keys of `data` that Kubernetes' model `model` (e.g. V1PodTemplateSpec) does not have, as dotted paths.

    The client's deserializer drops what it does not know; serializing back and comparing shows what was dropped."""
    client = ApiClient()
    known = client.sanitize_for_serialization(client._ApiClient__deserialize(data, model))
    return _dropped(data, known, path)


def _dropped(given: Any, known: Any, path: str) -> list[str]:
    if isinstance(given, dict):
        known = known if isinstance(known, dict) else {}
        return [found for key, value in given.items()
                for found in ([f"{path}.{key}"] if key not in known else _dropped(value, known[key], f"{path}.{key}"))]
    if isinstance(given, list):  # a list the model shortened lost items: each of their keys counts as dropped
        known = known if isinstance(known, list) and len(known) == len(given) else [None] * len(given)
        return [found for i, (g, k) in enumerate(zip(given, known, strict=True)) for found in _dropped(g, k, f"{path}[{i}]")]
    return []


def unknown_fields(data: Any, fields: Any, path: str = "") -> list[str]:
    """Every key of `data`, at any depth, that `fields` (a table above, or a model's name) does not name."""
    if fields is None or fields == MAP:
        return []
    if isinstance(fields, str):
        return model_unknown_fields(data, fields, path)
    if isinstance(fields, list):
        return [found for i, item in enumerate(data) for found in unknown_fields(item, fields[0], f"{path}[{i}]")]
    return [found for key, value in data.items()
            for found in ([f"{path}.{key}"] if key not in fields else unknown_fields(value, fields[key], f"{path}.{key}"))]


def manifest_unknown_fields(manifest: dict) -> list[str]:
    """The fields of a RayCluster or RayJob manifest that KubeRay's v1 types (and Kubernetes' models) do not have."""
    kind = (manifest.get("apiVersion"), manifest.get("kind"))
    if kind not in KINDS:
        raise ValueError(f"not a KubeRay v1 kind this table covers: {kind}")
    return unknown_fields(manifest, KINDS[kind], manifest["kind"])
