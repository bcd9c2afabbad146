"""The KubeRay v1 fields deploy/kuberay relies on, as KubeRay's Go types name them (their json tags), and a check that
a manifest uses no other: the CRD prunes an unknown field without a word, so a misspelt `minReplica` would leave
a group at its default and nothing would say so.

Taken from ray-project/kuberay at tag v1.7.0 (the operator version docs/kubernetes.md installs):
ray-operator/apis/ray/v1/raycluster_types.go (RayClusterSpec, AuthOptions, HeadGroupSpec, WorkerGroupSpec,
AutoscalerOptions and the option types below them) and ray-operator/apis/ray/v1/rayjob_types.go (RayJobSpec,
SubmitterConfig, DeletionStrategy). Pod templates and other core types are Kubernetes' own: the `kubernetes`
client's models check them.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client import ApiClient

# A field's value: a table of fields (dict), free-form keys (MAP: rayStartParams, labels), a list of tables
# ([dict]), a Kubernetes model by name ("V1PodTemplateSpec"), or a plain value (None).
MAP = "map"

AUTH_OPTIONS = {"enableK8sTokenAuth": None, "secretName": None, "mode": None}
AUTOSCALER_OPTIONS = {"resources": "V1ResourceRequirements", "image": None, "imagePullPolicy": None,
                      "securityContext": "V1SecurityContext", "idleTimeoutSeconds": None, "upscalingMode": None,
                      "version": None, "env": ["V1EnvVar"], "envFrom": ["V1EnvFromSource"],
                      "volumeMounts": ["V1VolumeMount"], "command": None, "args": None}
REDIS_CREDENTIAL = {"valueFrom": "V1EnvVarSource", "value": None}
GCS_FAULT_TOLERANCE_OPTIONS = {"backend": None, "redisUsername": REDIS_CREDENTIAL, "redisPassword": REDIS_CREDENTIAL,
                               "externalStorageNamespace": None, "redisAddress": None,
                               "storage": {"claimName": None, "size": None, "storageClassName": None,
                                           "accessModes": None, "subPath": None, "deletionPolicy": None}}
HISTORY_SERVER_OPTIONS = {"collectorOptions": {"image": None, "imagePullPolicy": None,
                                               "resources": "V1ResourceRequirements", "env": ["V1EnvVar"]}}
NETWORK_POLICY_RULES = {"ingressRules": ["V1NetworkPolicyIngressRule"], "egressRules": ["V1NetworkPolicyEgressRule"]}
NETWORK_POLICY_CONFIG = {"mode": None, "head": NETWORK_POLICY_RULES, "worker": NETWORK_POLICY_RULES,
                         "workerGroups": [{"groupName": None, **NETWORK_POLICY_RULES}]}
HEAD_GROUP_SPEC = {"template": "V1PodTemplateSpec", "headService": "V1Service", "enableIngress": None,
                   "ingressOptions": {"host": None, "path": None, "pathType": None, "tls": ["V1IngressTLS"]},
                   "resources": MAP, "labels": MAP, "rayStartParams": MAP, "serviceType": None}
WORKER_GROUP_SPEC = {"suspend": None, "groupName": None, "replicas": None, "minReplicas": None, "maxReplicas": None,
                     "idleTimeoutSeconds": None, "priority": None, "resources": MAP, "labels": MAP,
                     "rayStartParams": MAP, "template": "V1PodTemplateSpec", "scaleStrategy": {"workersToDelete": None},
                     "numOfHosts": None}
RAY_CLUSTER_SPEC = {"upgradeStrategy": {"type": None}, "authOptions": AUTH_OPTIONS, "suspend": None,
                    "managedBy": None, "autoscalerOptions": AUTOSCALER_OPTIONS, "headServiceAnnotations": MAP,
                    "enableInTreeAutoscaling": None, "gcsFaultToleranceOptions": GCS_FAULT_TOLERANCE_OPTIONS,
                    "historyServerOptions": HISTORY_SERVER_OPTIONS, "networkPolicy": NETWORK_POLICY_CONFIG,
                    "tlsOptions": {"enabled": None}, "headGroupSpec": HEAD_GROUP_SPEC, "rayVersion": None,
                    "workerGroupSpecs": [WORKER_GROUP_SPEC]}
DELETION_POLICY = {"policy": None}
DELETION_STRATEGY = {"onSuccess": DELETION_POLICY, "onFailure": DELETION_POLICY,
                     "deletionRules": [{"policy": None, "condition": {"jobStatus": None, "jobDeploymentStatus": None,
                                                                      "ttlSeconds": None}}]}
RAY_JOB_SPEC = {"activeDeadlineSeconds": None, "backoffLimit": None, "rayClusterSpec": RAY_CLUSTER_SPEC,
                "submitterPodTemplate": "V1PodTemplateSpec", "metadata": MAP, "clusterSelector": MAP,
                "submitterConfig": {"backoffLimit": None}, "managedBy": None, "deletionStrategy": DELETION_STRATEGY,
                "entrypoint": None, "runtimeEnvYAML": None, "jobId": None, "submissionMode": None,
                "entrypointResources": None, "entrypointNumCpus": None, "entrypointNumGpus": None,
                "ttlSecondsAfterFinished": None, "preRunningDeadlineSeconds": None, "shutdownAfterJobFinishes": None,
                "suspend": None}
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
