"""The cluster's AWS access (cluster/aws/*.json) and its nodes in cluster.yaml: least privilege, IMDSv2, SSH from one range.

Pure file checks, no AWS and no Ray cluster. Each check lists what it finds wrong; each test runs it on the files
as written (nothing) and on a copy broken the way the check exists to catch, so that none passes vacuously.
Whether AWS evaluates these conditions as intended is for a real account to show (docs/cluster-aws.md).
"""

from __future__ import annotations

import ast
import copy
import fnmatch
import ipaddress
import json
import re
from pathlib import Path

import pytest
import ray.autoscaler

from tests.cluster.conftest import worker_types

ROOT = Path(__file__).resolve().parents[2]
AWS = ROOT / "cluster" / "aws"
# The bucket, as the workers' policy names it for listing (the placeholder, or the bucket once docs/cluster-aws.md's sed filled it in)
BUCKET = next(s["Resource"] for s in json.loads((AWS / "worker-policy.json").read_text())["Statement"]
              if s["Action"] == "s3:ListBucket")
CONDITION_OPERATORS = re.compile(
    r"(ForAllValues:|ForAnyValue:)?(String(Not)?Equals(IgnoreCase)?|String(Not)?Like|Numeric\w+|Date\w+|Bool|"
    r"(Not)?IpAddress|Arn(Not)?(Equals|Like)|Null)(IfExists)?$")
STATEMENT_KEYS = {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource",
                  "Condition"}
MANAGED_POLICY_LIMIT = 6144  # characters, whitespace not counted: AWS's limit for a customer managed policy


def policy(name: str) -> dict:
    return json.loads((AWS / name).read_text())


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def allows(statement: dict, action: str) -> bool:
    """Whether an Allow statement's Action covers `action` (IAM's wildcards; actions are case-insensitive)."""
    return statement["Effect"] == "Allow" and any(
        fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in as_list(statement.get("Action", [])))


# --- the documents ------------------------------------------------------------------------------------------

def iam_document_problems(document: dict, trust: bool = False) -> list[str]:
    """What IAM would refuse, or what says a policy is not the kind it should be (identity or trust)."""
    problems = []
    if set(document) - {"Version", "Id", "Statement"} or document.get("Version") != "2012-10-17":
        problems.append("top level: only Version 2012-10-17, Id and Statement")
    statements = document.get("Statement")
    if not isinstance(statements, list) or not statements:
        return [*problems, "Statement: a non-empty list"]
    sids = [statement.get("Sid") for statement in statements if "Sid" in statement]
    if len(sids) != len(set(sids)) or not all(re.fullmatch(r"[A-Za-z0-9]+", str(sid)) for sid in sids):
        problems.append(f"Sids: unique and alphanumeric: {sids}")
    for i, statement in enumerate(statements):
        where = f"statement {statement.get('Sid', i)}"
        if set(statement) - STATEMENT_KEYS or statement.get("Effect") not in ("Allow", "Deny"):
            problems.append(f"{where}: unknown keys or Effect")
        if ("Action" in statement) == ("NotAction" in statement):
            problems.append(f"{where}: one of Action, NotAction")
        actions = as_list(statement.get("Action", statement.get("NotAction", [])))
        problems += [f"{where}: action {a!r}" for a in actions if not re.fullmatch(r"\*|[a-z0-9-]+:[A-Za-z0-9*]+", a)]
        if trust:
            if "Principal" not in statement or "Resource" in statement:
                problems.append(f"{where}: a trust policy names a Principal, no Resource")
        elif ("Resource" in statement) == ("NotResource" in statement) or "Principal" in statement:
            problems.append(f"{where}: one of Resource, NotResource; no Principal")
        resources = as_list(statement.get("Resource", statement.get("NotResource", [])))
        problems += [f"{where}: resource {r!r}" for r in resources if r != "*" and not r.startswith("arn:aws:")]
        for operator, tests in statement.get("Condition", {}).items():
            if not CONDITION_OPERATORS.match(operator) or not isinstance(tests, dict):
                problems.append(f"{where}: condition {operator!r}")
    if len("".join(json.dumps(document).split())) > MANAGED_POLICY_LIMIT:
        problems.append("longer than a managed policy may be")
    return problems


@pytest.mark.parametrize("name", ["head-policy.json", "worker-policy.json", "ec2-trust.json"])
def test_the_policies_are_iam_documents(name):
    assert iam_document_problems(policy(name), trust=name == "ec2-trust.json") == []


@pytest.mark.parametrize("break_it", [
    lambda p: p.update(Version="2008-10-17"),
    lambda p: p["Statement"][0].update(Sid="read-the-cluster"),
    lambda p: p["Statement"][0].update(Action=["ec2 DescribeInstances"]),
    lambda p: p["Statement"][0].update(NotAction="s3:GetObject"),
    lambda p: p["Statement"][0].update(Resource="FILL-IN-BUCKET/sweeps/*"),
    lambda p: p["Statement"][1].update(Condition={"StringEqual": {"ec2:InstanceType": "g5.xlarge"}}),
    lambda p: p["Statement"].extend(copy.deepcopy(p["Statement"]) * 3),  # repeated Sids, and too long
])
def test_the_document_check_catches_what_iam_refuses(break_it):
    broken = policy("head-policy.json")
    break_it(broken)
    assert iam_document_problems(broken)
    assert iam_document_problems(policy("ec2-trust.json"))  # a trust policy is no identity policy


# --- least privilege ----------------------------------------------------------------------------------------

def wildcard_grants(document: dict) -> list[dict]:
    """Allow statements that grant every action (`*`) or a whole service's (`svc:*`) on every resource, or that
    grant by exclusion (NotAction, NotResource: everything else)."""
    def everything(action: str) -> bool:
        return action == "*" or action.endswith(":*")
    return [s for s in document["Statement"] if s["Effect"] == "Allow" and (
        "NotAction" in s or "NotResource" in s
        or (any(map(everything, as_list(s["Action"]))) and "*" in as_list(s["Resource"])))]


@pytest.mark.parametrize("name", ["head-policy.json", "worker-policy.json"])
def test_no_statement_allows_everything_everywhere(name):
    assert wildcard_grants(policy(name)) == []
    for grant in ({"Action": "*"}, {"Action": ["s3:GetObject", "ec2:*"]}, {"NotAction": "iam:*"}):
        broken = policy(name)
        broken["Statement"].append({"Effect": "Allow", "Resource": "*", **grant})
        assert wildcard_grants(broken) == [broken["Statement"][-1]]


def passable_roles(document: dict) -> list[str]:
    return sorted({r for s in document["Statement"] if allows(s, "iam:PassRole") for r in as_list(s["Resource"])})


def test_the_head_may_pass_the_workers_role_and_no_other(config):
    profiles = {spec["node_config"]["IamInstanceProfile"]["Arn"] for spec in worker_types(config).values()}
    assert len(profiles) == 1  # every GPU node type runs as the same role
    role = profiles.pop().replace(":instance-profile/", ":role/")  # docs/cluster-aws.md names the role as its profile
    assert passable_roles(policy("head-policy.json")) == [role]
    assert passable_roles(policy("worker-policy.json")) == []
    broken = policy("head-policy.json")
    broken["Statement"].append({"Effect": "Allow", "Action": "iam:*", "Resource": "arn:aws:iam::FILL-IN-ACCOUNT:role/*"})
    assert passable_roles(broken) != [role]


def outside_the_sweep_prefix(document: dict, prefix: str = "sweeps") -> list[str]:
    """What a policy allows beyond the objects under s3://BUCKET/PREFIX/ and the listing of that prefix (a listing
    by PREFIX alone, without its '/', names the keys of PREFIX-other/ too)."""
    problems = []
    for s in document["Statement"]:
        actions, resources = as_list(s["Action"]), as_list(s["Resource"])
        problems += [f"action {a}" for a in actions if not a.startswith("s3:")]
        for resource in resources:
            if resource == BUCKET:  # the bucket itself: listing, by prefix only
                listed = s.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
                if actions != ["s3:ListBucket"] or not listed or not all(
                        p.startswith(f"{prefix}/") for p in as_list(listed)):
                    problems.append(f"{actions} on the bucket, listing {listed}")
            elif not resource.startswith(f"{BUCKET}/{prefix}/"):
                problems.append(f"resource {resource}")
    return problems


def test_the_workers_touch_the_sweep_storage_only():
    assert outside_the_sweep_prefix(policy("worker-policy.json")) == []
    assert outside_the_sweep_prefix(policy("head-policy.json"))  # the head reaches further: MLflow, EC2, IAM
    for break_it in (lambda s: s[0].update(Resource=f"{BUCKET}/*"),
                     lambda s: s[0].update(Resource="*"),
                     lambda s: s[1].pop("Condition"),
                     lambda s: s[1]["Condition"]["StringLike"].update({"s3:prefix": ["*"]}),
                     lambda s: s[1]["Condition"]["StringLike"].update({"s3:prefix": ["sweeps", "sweeps/*"]}),
                     lambda s: s[1]["Condition"]["StringLike"].update({"s3:prefix": ["sweeps/*", "mlflow/*"]}),
                     lambda s: s.append({"Effect": "Allow", "Action": "ec2:DescribeInstances", "Resource": "*"})):
        broken = policy("worker-policy.json")
        break_it(broken["Statement"])
        assert outside_the_sweep_prefix(broken)


def s3_writable(document: dict, key: str) -> bool:
    return any(allows(s, "s3:PutObject") and any(fnmatch.fnmatchcase(f"{BUCKET}/{key}", r) for r in as_list(s["Resource"]))
               for s in document["Statement"])


def test_the_workers_write_trial_checkpoints_and_nothing_resume_reads_as_code():
    """Tune's state (sweeps/NAME/tune/) is unpickled by `resume` on the head: the workers, which run the trials'
    code, write only under sweeps/NAME/train/ (Ray Train's checkpoints) and the doctor's probe file."""
    workers = policy("worker-policy.json")
    assert s3_writable(workers, "sweeps/default/train/3f2a9c1d/checkpoint_2026-12-02_05-59-32.056640/last.pt")
    assert s3_writable(workers, "sweeps/.mamba-tune-probe-0123abcd")
    for key in ("sweeps/default/tune/experiment_state-2026-12-02_05-59-32.json", "sweeps/default/tune/searcher.pkl",
                "sweeps/default/sweep.json", "mlflow/1/models/m-1/artifacts/model.pkl"):
        assert not s3_writable(workers, key), key
    broken = policy("worker-policy.json")
    broken["Statement"][0]["Resource"] = f"{BUCKET}/sweeps/*"
    assert s3_writable(broken, "sweeps/default/tune/searcher.pkl")


def test_the_head_writes_where_cluster_yaml_sends_mlflow_and_the_sweeps(config):
    start = " ".join(config["head_start_ray_commands"])
    bucket, artifacts = re.search(r"--artifacts-destination s3://([^/\s]+)/(\S+)", start).groups()
    assert f"arn:aws:s3:::{bucket}" == BUCKET
    head = policy("head-policy.json")
    assert s3_writable(head, f"{artifacts}/1/run/artifacts/best.pt") and s3_writable(head, "sweeps/default/tune/state")
    assert not s3_writable(head, "wheels/mamba_ssm.whl") and not s3_writable(head, "elsewhere/x")


def unconfined_instance_actions(document: dict, cluster_name: str) -> list[str]:
    """Grants to start, stop, terminate or tag instances that do not require this cluster's tag (Ray tags every
    instance it launches with ray-cluster-name), or to launch them untagged."""
    problems = []
    for s in document["Statement"]:
        if not any(r.endswith(":instance/*") or r == "*" for r in as_list(s["Resource"])):
            continue
        equals = s.get("Condition", {}).get("StringEquals", {})
        ours = equals.get("ec2:ResourceTag/ray-cluster-name") == cluster_name
        at_launch = equals.get("ec2:CreateAction") == "RunInstances"
        for action in ("ec2:StartInstances", "ec2:StopInstances", "ec2:TerminateInstances", "ec2:CreateTags"):
            if allows(s, action) and not ours and not (action == "ec2:CreateTags" and at_launch):
                problems.append(f"{action} in {s.get('Sid')}")
        if allows(s, "ec2:RunInstances") and equals.get("aws:RequestTag/ray-cluster-name") != cluster_name:
            problems.append(f"ec2:RunInstances in {s.get('Sid')}")
    return problems


def launchable_instance_types(document: dict) -> set[str]:
    return {t for s in document["Statement"] if allows(s, "ec2:RunInstances")
            for t in as_list(s.get("Condition", {}).get("StringEquals", {}).get("ec2:InstanceType", []))}


def test_the_head_launches_and_stops_this_clusters_gpu_nodes_only(config):
    head = policy("head-policy.json")
    assert unconfined_instance_actions(head, config["cluster_name"]) == []
    assert launchable_instance_types(head) == {spec["node_config"]["InstanceType"] for spec in worker_types(config).values()}
    assert unconfined_instance_actions(head, "another-cluster")  # the tag it requires is this cluster's name
    broken = copy.deepcopy(head)
    terminate = next(s for s in broken["Statement"] if allows(s, "ec2:TerminateInstances"))
    terminate.pop("Condition")
    assert unconfined_instance_actions(broken, config["cluster_name"]) == [
        f"{a} in {terminate['Sid']}" for a in ("ec2:StartInstances", "ec2:StopInstances", "ec2:TerminateInstances",
                                               "ec2:CreateTags")]


# --- the nodes ----------------------------------------------------------------------------------------------

def without_imdsv2(config: dict) -> list[str]:
    """Node types whose instances answer the metadata service (and hand out their role) without a session token."""
    required = {"HttpTokens": "required", "HttpEndpoint": "enabled"}
    return [name for name, spec in config["available_node_types"].items()
            if any(spec["node_config"].get("MetadataOptions", {}).get(k) != v for k, v in required.items())]


def test_every_node_type_requires_imdsv2(config):
    assert without_imdsv2(config) == []
    broken = copy.deepcopy(config)
    del broken["available_node_types"]["gpu-4x"]["node_config"]["MetadataOptions"]
    broken["available_node_types"]["head"]["node_config"]["MetadataOptions"] = {"HttpTokens": "optional"}
    assert without_imdsv2(broken) == ["head", "gpu-4x"]


def test_the_head_has_its_own_instance_profile(config):
    def profile(spec):
        return spec["node_config"].get("IamInstanceProfile", {}).get("Arn")
    head = profile(config["available_node_types"][config["head_node_type"]])
    assert head and head.endswith("/mamba-tune-head") and head not in {profile(s) for s in worker_types(config).values()}
    assert all(profile(s) for s in worker_types(config).values())  # else Ray gives a worker the head's profile


def world_open_ssh(rules: list[dict]) -> list[dict]:
    """Ingress rules that let port 22 in from anywhere (0.0.0.0/0, ::/0)."""
    def has_22(rule):
        return rule.get("IpProtocol") in ("-1", "all") or (
            rule.get("IpProtocol") in ("tcp", "6") and rule.get("FromPort", -1) <= 22 <= rule.get("ToPort", 65535))

    def anywhere(cidr):
        return not cidr.startswith("FILL-IN") and ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    return [rule for rule in rules if has_22(rule) and any(
        anywhere(r.get("CidrIp", r.get("CidrIpv6", ""))) for r in rule.get("IpRanges", []) + rule.get("Ipv6Ranges", []))]


def test_ssh_comes_in_from_one_range_only(config):
    rules = json.loads((AWS / "ssh-ingress.json").read_text())
    assert [r["FromPort"] for r in rules] == [22] and world_open_ssh(rules) == []
    for opened in ({"IpRanges": [{"CidrIp": "0.0.0.0/0"}]}, {"Ipv6Ranges": [{"CidrIpv6": "::/0"}]}):
        assert world_open_ssh([{**rules[0], "IpRanges": [], **opened}])
    assert world_open_ssh([{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
    # The group Ray would make itself opens SSH to the world whatever provider.security_group says (Ray 2.60):
    assert world_open_ssh(rays_default_ssh_rules())
    # so every node type names the group made by hand (docs/cluster-aws.md), and Ray makes none.
    assert types_ray_makes_a_group_for(config) == [] and "security_group" not in config["provider"]
    broken = copy.deepcopy(config)
    del broken["available_node_types"]["gpu-1x-spot"]["node_config"]["SecurityGroupIds"]
    assert types_ray_makes_a_group_for(broken) == ["gpu-1x-spot"]


def types_ray_makes_a_group_for(config: dict) -> list[str]:
    """The node types without SecurityGroupIds: `ray up` makes them a group (ray/autoscaler/_private/aws/config.py)."""
    return [name for name, spec in config["available_node_types"].items()
            if not str(spec["node_config"].get("SecurityGroupIds", "")).startswith("['sg-")]


def rays_default_ssh_rules() -> list[dict]:
    """The SSH rule `ray up` adds to a security group it makes: its own function, read from Ray's source (importing
    the module needs boto3, which only the cluster's head installs)."""
    source = (Path(ray.autoscaler.__file__).parent / "_private" / "aws" / "config.py").read_text()
    function = next(node for node in ast.parse(source).body
                    if isinstance(node, ast.FunctionDef) and node.name == "_create_default_ssh_inbound_rules")
    namespace: dict = {}
    exec(compile(ast.Module([function], type_ignores=[]), "ray-aws-config", "exec"), namespace)
    return namespace[function.name]()
