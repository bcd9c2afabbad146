"""Ray's relayed lines (raylet warnings, worker output) go to the sweep's ray.log, without colour codes; the
progress lines stay on the terminal."""

from __future__ import annotations

import io
import logging
import sys

from ray._private.worker import print_worker_logs

from tuning.cli.ray_output import RayLineSplitter, is_ray_line, ray_output_to

RAYLET = {"lines": ["WARNING: 8 PYTHON worker processes have been started on node: 1f2e with address: 10.0.0.2."],
          "pid": "raylet", "is_err": False, "ip": "10.0.0.2", "localhost": "10.0.0.2"}
WORKER = {"lines": ["[rank0]: epoch 3 done"], "pid": 4711, "actor_name": "RayTrainWorker", "is_err": False,
          "ip": "10.0.0.3", "localhost": "10.0.0.2"}


def test_rays_own_printer_lines_go_to_the_log_and_ours_to_the_terminal():
    terminal, log = io.StringIO(), io.StringIO()
    splitter = RayLineSplitter(terminal, log)
    print("trial 1a2b started: lr 1.00e-03", file=splitter)
    print_worker_logs(RAYLET, splitter)  # exactly as Ray's driver prints them, colour codes and all
    print_worker_logs(WORKER, splitter)
    print("trial 1a2b ended completed at epoch 4", file=splitter)
    assert terminal.getvalue() == "trial 1a2b started: lr 1.00e-03\ntrial 1a2b ended completed at epoch 4\n"
    assert log.getvalue().splitlines() == [
        "(raylet) WARNING: 8 PYTHON worker processes have been started on node: 1f2e with address: 10.0.0.2.",
        "(RayTrainWorker pid=4711, ip=10.0.0.3) [rank0]: epoch 3 done"]


def test_only_rays_prefixes_count_as_its_lines():
    assert is_ray_line("\x1b[33m(raylet)\x1b[0m WARNING: x") and is_ray_line("(pid=12) hello")
    assert is_ray_line("(autoscaler +1m2s) Adding 1 node(s)") and is_ray_line("(run_trial pid=9, ip=1.2.3.4) x")
    assert not is_ray_line("error: --data x.parquet: no such file") and not is_ray_line("(seed 1, fold 2) x")
    assert not is_ray_line("\r\x1b[K1a2b e3 0.8123 | 3c4d e1 0.9")  # our live status line


def test_ray_output_to_a_file_restores_the_streams_and_rays_logger(tmp_path, capsys):
    ray_logger = logging.getLogger("ray")
    before = (sys.stdout, sys.stderr, list(ray_logger.handlers))
    with ray_output_to(tmp_path / "ray.log"):
        print_worker_logs(RAYLET, sys.stdout)
        print("ours")
        logging.getLogger("ray.train").warning("a warning of Ray's own")
    assert (sys.stdout, sys.stderr, list(ray_logger.handlers)) == before
    assert capsys.readouterr().out == "ours\n"
    logged = (tmp_path / "ray.log").read_text()
    assert "(raylet) WARNING: 8 PYTHON worker processes" in logged and "\x1b[" not in logged
    assert "WARNING ray.train: a warning of Ray's own" in logged
