"""`mamba-tune doctor`: a preflight of the Ray cluster a sweep will run on. Exit 0 all well, 1 problems, 2 bad input."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from tuning.cli.help import subcommand
from tuning.cli.store_options import add_storage_option, add_tracking_uri_option
from tuning.cluster.ray_address import ray_address
from tuning.sweep.ray_version import check_ray_version
from tuning.tracking.store import resolve_store
from tuning.uri_secrets import STORAGE_CREDENTIALS, refuse_credentials

if TYPE_CHECKING:
    from tuning.cluster.doctor import Finding

MARKS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def add_command(commands: argparse._SubParsersAction) -> None:
    doctor = subcommand(commands, "doctor", "check a Ray cluster (or this machine) before a sweep",
                         ("mamba-tune doctor", "mamba-tune doctor --address auto --storage /shared/sweeps "
                          "--tracking-uri http://mlflow:5000"),
                         "Check a Ray cluster (or this machine) before a sweep: each node's resources and versions, "
                         "that the storage is one folder every node sees, that the tracking store answers from "
                         "every node. Exit 0 all well, 1 problems (each with its fix), 2 bad input.")
    doctor.add_argument("--address", help="the Ray cluster (auto or HOST:PORT; default: RAY_ADDRESS, else a local "
                        "Ray started for the check)")
    add_storage_option(doctor, "the sweep storage to check")
    add_tracking_uri_option(doctor)  # the store to check
    doctor.set_defaults(run=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    refuse_credentials("--storage", args.storage, STORAGE_CREDENTIALS)  # its findings print it
    store = resolve_store(args.tracking_uri)  # a malformed URI is bad input: exit 2 before Ray starts
    ray_address(args.address)  # so is an address no Ray answers at

    check_ray_version()  # a Ray older than mamba-tune admits: one line, before anything of Ray Train is imported

    from tuning.cluster import doctor as checks
    from tuning.sweep import session

    started = session.start_ray(args.address)
    try:
        where = "a local Ray started for this check" if started else f"the Ray cluster at {_address()}"
        print(f"mamba-tune doctor: {where}", flush=True)
        findings = checks.examine(args.storage, store) + [_trial_path()]
    finally:
        if started:
            session.ray.shutdown()
    for finding in findings:
        print(f"  {MARKS[finding.level]}  {finding.text}" + (f"\n        fix: {finding.fix}" if finding.fix else ""))
    failed = sum(finding.level == "fail" for finding in findings)
    warned = sum(finding.level == "warn" for finding in findings)
    if failed:
        print(f"{failed} problem(s) a sweep would trip on; fix them and run `mamba-tune doctor` again")
        return 1
    print("ready for a sweep" + (f" ({warned} warning(s))" if warned else ""))
    return 0


def _trial_path() -> Finding:
    """The path a sweep's trials take on this Ray with resources.trial_path auto (tuning/sweep/trial_path.py)."""
    from tuning.cluster.doctor import Finding
    from tuning.sweep.trial_path import AUTO, trial_path

    path = trial_path(AUTO)
    if path.fast:
        return Finding("ok", f"trial path: {path.describe()}")
    return Finding("warn", f"trial path: {path.describe()}; each trial costs more processes and CPU-seconds",
                   "run a Ray whose private hooks fit the fast path (the Ray of the cluster locks, docs/clusters.md); "
                   "sweeps run as they are on this one")


def _address() -> str:
    import ray

    return ray.get_runtime_context().gcs_address
