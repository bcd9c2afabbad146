"""deploy/kuberay: manifests KubeRay 1.7 and Kubernetes take as written (no field either drops), a head no trial
runs on, GPU groups from zero, a sweep plan that sees them, no credentials, and a RayJob entrypoint that
`mamba-tune sweep` itself accepts, with the storage the overlays give the head. The base's files as written here;
the overlays as kubectl renders them: tests/deploy/test_kustomize_overlays.py. Pure file checks: no cluster, no
network."""

from __future__ import annotations

import copy
import re
import shlex

import pytest
import yaml

from tests.deploy.kuberay_fields import manifest_unknown_fields, model_unknown_fields
from tests.deploy.kuberay_manifests import KUBERAY, ROOT, container, documents, groups
from tests.deploy.kustomize_overlays import OVERLAYS, images, rendered
from tests.deploy.pod_env import container_env, env_from_secrets
from tuning.cli.main import build_parser
from tuning.cluster.autoscaler import autoscaled_nodes
from tuning.cluster.ray_autoscaler_api import node_types_of_raycluster
from tuning.search.resources import gpus_on

GPU = "nvidia.com/gpu"
KEY_LIKE = re.compile(r"AKIA[0-9A-Z]{16}|aws_secret_access_key|password:|token:|-----BEGIN [A-Z ]*PRIVATE KEY", re.I)


def test_kuberay_manifests_use_only_fields_kuberay_and_kubernetes_have(cluster, job):
    assert cluster["apiVersion"] == job["apiVersion"] == "ray.io/v1"
    assert manifest_unknown_fields(cluster) == []
    assert manifest_unknown_fields(job) == []
    claim = documents("base/head-volume.yaml")["PersistentVolumeClaim"]
    assert model_unknown_fields(claim, "V1PersistentVolumeClaim", "PVC") == []
    account = documents("base/service-account.yaml")["ServiceAccount"]
    assert model_unknown_fields(account, "V1ServiceAccount", "ServiceAccount") == []


def test_kuberay_base_images_are_the_placeholders_each_overlay_names(cluster):
    # `images: [{name: mamba-tune, newName: REGISTRY/mamba-tune}]` renames exactly these
    assert set(images(cluster)) == {"mamba-tune:cpu", "mamba-tune:cuda"}


@pytest.mark.parametrize(("where", "misspelt", "path"), [
    (lambda c: c["spec"]["workerGroupSpecs"][0], "minReplica", "RayCluster.spec.workerGroupSpecs[0].minReplica"),
    (lambda c: c["spec"]["headGroupSpec"], "rayStartParam", "RayCluster.spec.headGroupSpec.rayStartParam"),
    (lambda c: c["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0], "envFom",
     "RayCluster.spec.headGroupSpec.template.spec.containers[0].envFom"),
    (lambda c: c["spec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["resources"], "limit",
     "RayCluster.spec.workerGroupSpecs[1].template.spec.containers[0].resources.limit"),
    (lambda c: c["spec"]["authOptions"], "secretname", "RayCluster.spec.authOptions.secretname"),
])
def test_kuberay_field_check_catches_a_misspelt_field(cluster, where, misspelt, path):
    broken = copy.deepcopy(cluster)
    where(broken)[misspelt] = 1
    assert manifest_unknown_fields(broken) == [path]


def test_kuberay_head_runs_no_trial_and_serves_the_jobs_api(cluster):
    head = cluster["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"  # a string: KubeRay's rayStartParams is map[string]string
    assert head["rayStartParams"]["dashboard-host"] == "0.0.0.0"
    assert {port["containerPort"] for port in container(head)["ports"]} >= {6379, 8265}
    assert GPU not in container(head)["resources"]["limits"]


def test_kuberay_gpu_groups_scale_from_zero_with_a_gpu_limit(cluster):
    assert cluster["spec"]["enableInTreeAutoscaling"] is True
    gpu_groups = {name: g for name, g in groups(cluster).items() if GPU in container(g)["resources"]["limits"]}
    assert set(gpu_groups) == {"gpu-1x", "gpu-4x"}
    for group in groups(cluster).values():  # the CPU group too: nothing runs, nothing is paid for, between sweeps
        assert group["minReplicas"] == group["replicas"] == 0 and group["maxReplicas"] > 0
    for group in gpu_groups.values():
        resources = container(group)["resources"]
        assert int(resources["limits"][GPU]) >= 1 and resources["requests"][GPU] == resources["limits"][GPU]
        assert container(group)["image"].endswith(":cuda")
    assert container(groups(cluster)["cpu"])["image"].endswith(":cpu")


def test_kuberay_ray_version_is_the_locked_ray(cluster):
    for lock in ("head.txt", "gpu-worker.txt"):
        locked = re.search(r"^ray==(\S+)", (ROOT / "cluster" / "locks" / lock).read_text(), re.M).group(1)
        assert cluster["spec"]["rayVersion"] == locked, lock


def test_kuberay_sweep_plans_for_the_gpu_pods_the_autoscaler_may_add(cluster):
    """The worker groups as KubeRay's autoscaler reads the RayCluster (Ray's own derivation, which the sweep reads
    from the live cluster): with every GPU group at zero, the plan still sees their GPUs; no copy of them to keep."""
    live = copy.deepcopy(cluster)
    live["metadata"]["namespace"] = "default"  # the API server fills it in
    config = node_types_of_raycluster(live)
    types = config["available_node_types"]
    assert list(types)[1:] == list(groups(cluster))  # in order: the plan fills them so
    for name, group in groups(cluster).items():
        limits = container(group)["resources"]["limits"]
        assert types[name]["max_workers"] == group["maxReplicas"]
        assert types[name]["resources"]["CPU"] == int(limits["cpu"])
        assert types[name]["resources"].get("GPU", 0) == int(limits.get(GPU, 0))
    assert gpus_on([[], autoscaled_nodes(config)]) == 8 * 1 + 2 * 4  # with every GPU group at zero, it sees 16
    assert "ConfigMap" not in documents("base/raycluster.yaml")
    assert "ray_bootstrap_config" not in (KUBERAY / "base" / "raycluster.yaml").read_text()


def test_kuberay_mlflow_and_credentials_come_from_secrets_only(cluster):
    text = (KUBERAY / "base" / "raycluster.yaml").read_text() + (KUBERAY / "rayjob.yaml").read_text()
    assert not KEY_LIKE.search(text)
    head, workers = container(cluster["spec"]["headGroupSpec"]), [*map(container, groups(cluster).values())]
    for spec in [head, *workers]:
        assert not any(var.get("name", "").startswith(("MLFLOW_", "AWS_")) and "value" in var for var in spec.get("env", []))


SETTINGS = {"mamba-tune-settings": {"MAMBA_TUNE_STORAGE": "s3://bucket/sweeps",
                                    "MLFLOW_TRACKING_URI": "http://mlflow:5000"}}
LOGIN = {"MLFLOW_TRACKING_USERNAME": "sweeps", "MLFLOW_TRACKING_PASSWORD": "mlflow-password"}
SECRETS = {"mamba-tune-db": {"PGPASSWORD": "db-password"}, "mamba-tune-mlflow": LOGIN}


def test_kuberay_head_alone_gets_the_database_password_and_the_mlflow_login(cluster):
    """The environment each Ray container starts with, as the kubelet builds it from envFrom: the head's has
    PGPASSWORD from the secret mamba-tune-db (a sweep's --study-url postgresql://USER@HOST/DB names no password) and
    the tracking server's login from mamba-tune-mlflow, both optional (a site without them still starts a head). No
    worker holds the login: no trial talks to MLflow, only the driver on the head (docs/tracking.md)."""
    head = container(cluster["spec"]["headGroupSpec"])
    env = container_env(head, SETTINGS, SECRETS)
    assert env["PGPASSWORD"] == "db-password" and LOGIN.items() <= env.items()
    assert env["MAMBA_TUNE_STORAGE"] == "s3://bucket/sweeps"  # and the settings beside them
    assert env_from_secrets(head)["mamba-tune-db"] is env_from_secrets(head)["mamba-tune-mlflow"] is True  # optional
    without = container_env(head, SETTINGS, {})  # neither secret made: the head starts all the same, without them
    assert "PGPASSWORD" not in without and not LOGIN.keys() & without.keys()
    for name, group in groups(cluster).items():
        worker = container_env(container(group), SETTINGS, SECRETS)
        assert "mamba-tune-mlflow" not in env_from_secrets(container(group)), name
        assert not LOGIN.keys() & worker.keys() and worker["MAMBA_TUNE_STORAGE"] == "s3://bucket/sweeps", name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kuberay_rayjob_entrypoint_is_a_sweep_mamba_tune_accepts(job, overlay, monkeypatch):
    assert job["spec"]["clusterSelector"]["ray.io/cluster"] == "mamba-tune"
    entrypoint = job["spec"]["entrypoint"]
    words = shlex.split(entrypoint)
    assert words[:2] == ["mamba-tune", "sweep"]
    # The head's environment, as the overlay sets it: the bucket is the storage, the file names none
    settings = rendered(overlay)["ConfigMap", "mamba-tune-settings"]["data"]
    monkeypatch.setenv("MAMBA_TUNE_STORAGE", settings["MAMBA_TUNE_STORAGE"])
    args = build_parser().parse_args(words[1:])
    assert args.command == "sweep" and args.storage == settings["MAMBA_TUNE_STORAGE"]
    # each `kubectl create` a sweep of its own, named after its Ray job: no --name to edit, no name in use refused
    assert args.name_from_ray_job and args.name is None and "generateName" in job["metadata"]
    assert "FILL" not in (KUBERAY / "rayjob.yaml").read_text()
    assert (ROOT / args.space).is_file()  # the space the image holds, relative to its working folder
    # MLflow from the head's MLFLOW_TRACKING_URI (the secret): KubeRay's submitter runs the entrypoint in a shell
    # of its own, which would expand a $VARIABLE to nothing before the head ever saw it.
    assert args.tracking_uri is None and "$" not in entrypoint


def test_kuberay_rayjob_data_and_records_are_on_the_heads_volume(cluster, job):
    args = build_parser().parse_args(shlex.split(job["spec"]["entrypoint"])[1:])
    head = container(cluster["spec"]["headGroupSpec"])
    runs = {m["name"]: m["mountPath"] for m in head["volumeMounts"]}["head-runs"]
    assert runs == f"{head['workingDir']}/runs"  # runs/ of a sweep's working folder is the volume
    assert args.data.parts[0] == "runs" and not args.data.is_absolute()
    claim = documents("base/head-volume.yaml")["PersistentVolumeClaim"]["metadata"]["name"]
    volumes = {v["name"]: v for v in cluster["spec"]["headGroupSpec"]["template"]["spec"]["volumes"]}
    assert volumes["head-runs"]["persistentVolumeClaim"]["claimName"] == claim


def test_kuberay_heads_volume_is_writable_by_the_images_user(cluster):
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    uid = int(re.search(r"useradd .*--uid (\d+)", dockerfile).group(1))
    assert cluster["spec"]["headGroupSpec"]["template"]["spec"]["securityContext"]["fsGroup"] == uid


STOP_WAIT = "RAY_JOB_STOP_WAIT_TIME_S"  # Ray's: the seconds between a stopped job's SIGTERM and its SIGKILL


def sweep_stop_s() -> float:
    """The longest a sweep's own end waits on MLflow once stopped: its look's send, then the close."""
    from tuning.sweep.looks_kept import LOOK_SENT_S
    from tuning.tracking.runs import CLOSE_TIMEOUT_S

    return LOOK_SENT_S + CLOSE_TIMEOUT_S


def test_ray_reads_the_stop_wait_the_manifests_set():
    import inspect

    from ray.dashboard.modules.job.job_supervisor import JobSupervisor

    assert STOP_WAIT in inspect.getsource(JobSupervisor) and JobSupervisor.DEFAULT_RAY_JOB_STOP_WAIT_TIME_S == 3


def test_kuberay_gives_a_stopped_sweep_the_time_its_end_takes(cluster, job):
    # `ray job stop` and a RayJob deleted: SIGTERM, which the sweep handles as Ctrl-C, then SIGKILL after the wait
    head = container(cluster["spec"]["headGroupSpec"])
    wait = int({var["name"]: var.get("value") for var in head["env"]}[STOP_WAIT])  # every job on this cluster
    assert wait > sweep_stop_s()
    assert int(yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"][STOP_WAIT]) == wait  # this job anywhere
    # the head pod deleted: its preStop hook stops the running jobs so, and waits for them, within the grace period
    assert cluster["spec"]["headGroupSpec"]["template"]["spec"]["terminationGracePeriodSeconds"] > wait
    code = head["lifecycle"]["preStop"]["exec"]["command"][-1]
    compile(code, "preStop", "exec")
    assert "stop_job(" in code and "is_terminal()" in code


def test_kuberay_rayjob_names_no_image(job):
    """A plain file, which no overlay renders: an image in it would be pulled as written, one without its registry
    from Docker Hub. It names none: KubeRay's default submitter takes the head's image, which the overlay named
    with its registry (tests/deploy/test_cluster_access.py follows it through each overlay)."""
    assert images(job) == []
