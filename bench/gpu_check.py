"""The first check on a GPU machine: six sections, each in its own process with its own timeout.

Its run time: under 10 minutes on one GPU, an estimate: not yet run on one. Each section's timeout is a cap,
not its expected time; the default caps sum to 600 s (bench/gpu_sections/__init__.py), so the check ends
within about 10 minutes whatever hangs (plus TERM_GRACE_S for a section stopped at its cap).
Run it from the checkout, after `make` on the GPU machine (docs/gpus.md, "Installing the kernels"; the same page
says what each number means):
    .venv/bin/python bench/gpu_check.py                  # writes gpu_check.json after each section
    .venv/bin/python bench/gpu_check.py --cpu-smoke      # sections 4-6 on CPU with a tiny model: the script works
Sections (bench/gpu_sections/): environment, parity, forecaster, epoch, memory, sweep. The JSON report is
rewritten after every section (a hang or a crash loses nothing done before it) and printed at the end; a
section that exceeds its timeout is killed with everything it started ("timed out after N s"), one that
raises records its error's type and message, and the check goes on. Without CUDA, the sections that need
it say "skipped: no CUDA" and the CPU parts (environment, the Forecaster's CPU checkpoint) are real.
Exits 0 when the report is complete (the report says what failed; `problems` lists it), 2 for bad flags.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.gpu_sections import SECTIONS, section_named  # noqa: E402
from bench.gpu_sections.context import NO_CUDA, SectionContext, Skipped  # noqa: E402
from model.atomic import write_text_atomic  # noqa: E402

TERM_GRACE_S = 10  # after SIGTERM (a sweep then stops Ray), SIGKILL
TAIL = 3000  # characters of a failed section's output kept in the report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.section:  # a section's own process, started by the runner below
        return run_section(args)
    names = args.sections or [s.name for s in SECTIONS]
    timeouts = {s.name: args.timeouts.get(s.name, s.timeout_s) for s in SECTIONS}
    report = {"check": "bench/gpu_check.py", "mode": "cpu-smoke" if args.cpu_smoke else "full",
              "started": datetime.now(timezone.utc).isoformat(timespec="seconds"), "finished": None,
              "sections": {n: {"status": "pending", "timeout_s": timeouts[n], "what": section_named(n).what}
                           for n in names}, "problems": []}
    out = Path(args.out)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        for name in names:
            entry = report["sections"][name]
            skip = skip_reason(section_named(name), report, args.cpu_smoke)
            if skip:
                entry.update(status="skipped", detail=skip)
            else:
                entry["status"] = "running"
                write_json(report, out)
                entry.update(run_child(name, timeouts[name], args.cpu_smoke, Path(scratch)))
            note(name, entry)
            problem = problem_of(name, entry)
            if problem:
                report["problems"].append(problem)
            write_json(report, out)
    report["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    write_json(report, out)
    print(json.dumps(finite(report), indent=2))
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="sections: " + "; ".join(
        f"{s.name} ({s.timeout_s:.0f} s): {s.what}" for s in SECTIONS))
    parser.add_argument("--out", default="gpu_check.json", help="the JSON report, rewritten after each section "
                        "(default: gpu_check.json)")
    parser.add_argument("--cpu-smoke", action="store_true", help="run sections 4-6 on CPU with a tiny model and "
                        "1,500 bars: checks the script's code paths, measures nothing")
    parser.add_argument("--sections", type=section_list, help="only these, comma-separated, e.g. parity,epoch")
    parser.add_argument("--timeout", action="append", default=[], metavar="SECTION=SECONDS",
                        help="a section's timeout in seconds, over its default (repeatable)")
    parser.add_argument("--section", help=argparse.SUPPRESS)  # internal: run one section in this process
    parser.add_argument("--result", help=argparse.SUPPRESS)  # internal: where that section writes its answer
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--section-timeout", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.timeouts = {}
    for pair in args.timeout:
        name, _, seconds = pair.partition("=")
        if name not in {s.name for s in SECTIONS} or not is_positive(seconds):
            parser.error(f"--timeout {pair}: give SECTION=SECONDS, SECTION one of "
                         f"{', '.join(s.name for s in SECTIONS)}, SECONDS a positive number; e.g. --timeout epoch=300")
        args.timeouts[name] = float(seconds)
    return args


def section_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = [s.name for s in SECTIONS]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown section(s) {', '.join(unknown) or '(none given)'}; "
                                         f"choose among {', '.join(known)}")
    return [n for n in known if n in names]  # in the order they run


def is_positive(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


def skip_reason(section, report: dict[str, Any], smoke: bool) -> str | None:
    """'skipped: no CUDA' when the environment section found none and the section cannot run without it;
    None otherwise (a section whose environment is unknown runs, and decides for itself)."""
    environment = report["sections"].get("environment", {})
    no_cuda = environment.get("status") == "ok" and not environment["result"].get("cuda_available")
    needs = section.needs_cuda == "always" or (section.needs_cuda == "gpu-run" and not smoke)
    return NO_CUDA if no_cuda and needs else None


def run_child(name: str, timeout_s: float, smoke: bool, scratch: Path) -> dict[str, Any]:
    """The section in a process of its own (and its own process group, all of which a timeout ends)."""
    result, log = scratch / f"{name}.result.json", scratch / f"{name}.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--section", name, "--result", str(result),
               "--workdir", str(scratch), "--section-timeout", str(timeout_s), *(["--cpu-smoke"] if smoke else [])]
    start = time.perf_counter()
    with open(log, "wb") as output:
        child = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
        try:
            code = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            end_group(child)
            return {"status": "timed out", "detail": f"timed out after {timeout_s:g} s",
                    "wall_s": round(time.perf_counter() - start, 1), "output_tail": tail(log)}
    wall = {"wall_s": round(time.perf_counter() - start, 1)}
    if not result.exists():
        return {"status": "error", **wall, "error": {"type": "SectionProcessDied",
                                                     "message": f"the section's process exited {code} (a signal "
                                                                f"when negative) before it reported"},
                "output_tail": tail(log)}
    answer = json.loads(result.read_text())
    if answer["status"] == "error":
        answer["output_tail"] = tail(log)
    return {**answer, **wall}


def end_group(child: subprocess.Popen) -> None:
    """SIGTERM to the section's process group (a sweep stops its Ray on it); SIGKILL to what is left of it after
    a grace period (the leader, or a worker it spawned that outlived it)."""
    signal_group(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    signal_group(child.pid, signal.SIGKILL)
    child.wait()


def signal_group(group: int, sig: signal.Signals) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:  # the group has ended
        pass


def run_section(args: argparse.Namespace) -> int:
    """In the section's own process: run it, and write its answer (ok, skipped or error) to --result."""
    import importlib

    section = section_named(args.section)
    context = SectionContext(smoke=args.cpu_smoke, workdir=Path(args.workdir), timeout_s=args.section_timeout)
    try:
        module = importlib.import_module(f"bench.gpu_sections.{section.name}")
        answer = {"status": "ok", "result": module.run(context)}
    except Skipped as skipped:
        answer = {"status": "skipped", "detail": str(skipped)}
    except Exception as exc:  # the section's failure is its finding; the check goes on with the next
        traceback.print_exc()
        answer = {"status": "error", "error": {"type": type(exc).__name__, "message": str(exc).strip()}}
    write_json(answer, Path(args.result))
    return 0


def problem_of(name: str, entry: dict[str, Any]) -> str | None:
    """One line for `problems` when a section did not give a clean answer (skips are not problems)."""
    if entry["status"] == "timed out":
        return f"{name}: {entry['detail']}"
    if entry["status"] == "error":
        return f"{name}: {entry['error']['type']}: {entry['error']['message'].splitlines()[0][:300]}"
    result = entry.get("result") if entry["status"] == "ok" else None
    if result is None:
        return None
    if name == "parity" and result.get("all_within") is False:
        return "parity: outside upstream's tolerance (see the cases)"
    if name == "memory" and (result.get("packed") or {}).get("out_of_memory"):
        return "memory: packed processes ran out of memory"
    if name == "sweep" and result.get("exit_code") not in (0, 3):
        return f"sweep: exit {result.get('exit_code')} ({result.get('exit_meaning')})"
    return None


def note(name: str, entry: dict[str, Any]) -> None:
    """One progress line on stderr (stdout carries only the report)."""
    error = entry.get("error")
    said = entry.get("detail") or (f"error: {error['type']}" if error else entry["status"])
    print(f"gpu_check: {name}: {said} ({entry.get('wall_s', 0)} s)", file=sys.stderr, flush=True)


def tail(path: Path) -> str:
    return path.read_bytes()[-TAIL:].decode(errors="replace") if path.exists() else ""


def write_json(values: dict[str, Any], path: Path) -> None:
    """Atomically (model/atomic.py): a reader never sees half a report."""
    write_text_atomic(path, json.dumps(finite(values), indent=2, default=str))


def finite(value: Any) -> Any:
    """The values with inf and NaN as the strings "inf", "-inf", "nan": strict JSON that any reader takes."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
