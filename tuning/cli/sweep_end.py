"""How a sweep with no winner ends: the answer when no trial passed the gate (exit NO_WINNER_EXIT, its MLflow run
tagged so), an error when every trial failed (exit 1); and what one that stopped short says (130, or 1)."""

from __future__ import annotations

import sys
from typing import Any

from tuning.search.finalists import CONFIRM, SEARCH, pending_runs
from tuning.search.gate_verdict import NO_WINNER, NO_WINNER_EXIT, OUTCOME_TAG, GateVerdict


def no_winner(records: list, verdict: GateVerdict | None, space: Any, folder: Any, mlflow: tuple | None = None) -> int:
    """No search trial completed: the answer when the gate stopped every trial that reached its epoch (`verdict`,
    gate_verdict's of `records`: NO_WINNER_EXIT; the sweep's MLflow run, `mlflow` = (store, name, sweep_id), tagged so),
    else (None) an error (1): every trial failed, or one the gate let through was stopped later."""
    if verdict is not None:
        print()
        for line in verdict.lines():
            print(line)
        print(f"records: {folder}/trials.json", flush=True)
        if mlflow is not None:
            tag_no_winner(*mlflow)
        return NO_WINNER_EXIT
    reasons = ", ".join(f"{n} {k}" for k in ("asha", "gate", "invalid", "nan", "error")
                        if (n := sum(r.stop_reason == k for r in records)))
    print(f"error: no trial ran all {space.scheduler.max_epochs} epochs ({reasons}); see "
          f"{folder}/trials.json, then widen the space or relax the gate", file=sys.stderr)
    return 1


def tag_no_winner(store: Any, name: str, sweep_id: str) -> None:
    """The sweep's MLflow parent run (ended FINISHED: every trial ran) tagged mamba_tune.outcome: no winner."""
    from tuning.tracking.runs import find_sweep_run

    found = find_sweep_run(store, name, sweep_id)
    try:
        if found is None:
            raise LookupError(f"no run of sweep {name} in {store.uri}")
        store.client().set_tag(found[1], OUTCOME_TAG, NO_WINNER)
    except Exception as exc:  # noqa: BLE001 - the answer stands without the tag
        print(f"warning: could not tag the sweep's MLflow run {OUTCOME_TAG}={NO_WINNER!r} ({exc})", file=sys.stderr)


def incomplete(records: list, space: Any, trials: int, resume_hint: str) -> int:
    """What a sweep that stopped short says: interrupted (130), or confirmation runs that failed (1)."""
    searched = sum(r.stage == SEARCH for r in records)
    pending = pending_runs(records, space.confirm, space.run.train.seed) if space.confirm is not None else []
    failed = {(r.finalist, r.seed, r.fold) for r in records if r.stage == CONFIRM and r.stop_reason == "error"}
    if searched >= trials and pending and all((p.finalist, p.seed, p.fold) in failed for p in pending):
        print(f"error: {len(pending)} confirmation run(s) failed, and a failed run is no result, so no winner is "
              f"chosen; run them again with `{resume_hint}`", file=sys.stderr)
        return 1
    confirming = f", {len(pending)} confirmation run(s) to go" if searched >= trials and pending else ""
    print(f"interrupted with {searched} of {trials} trials finished{confirming}; continue with `{resume_hint}`",
          file=sys.stderr)
    return 130
