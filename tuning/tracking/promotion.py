"""`promote`: the registered model's challenger against its champion on new bars; the better one is the champion.

    MODEL@challenger, MODEL@champion   the versions compared (a champion is optional: the first promote makes one)
    the bars                            must all come after the last bar either version trained on, as the version
                                        recorded it at registration (FIRST_BAR_TAG, LAST_BAR_TAG): timestamps, never
                                        a file's path or name, so the same bars copied elsewhere are refused too
    the comparison                      model/comparison.py: both models, HAR and persistence on the same samples,
                                        and a Diebold-Mariano test (model/diebold_mariano.py) of the challenger's
                                        per-sample losses against the champion's and against HAR's
    the objective                       the losses are the challenger's objective's (its version's tag
                                        mamba_tune.objective; a version registered before objectives: its
                                        target's default, mse_log for volatility): the champion is scored by the
                                        objective the challenger was chosen by, whatever it was trained for
                                        (both forecast the same target; docs/winner.md says why)
    the verdict                         the challenger promoted when its loss is lower; with `alpha`, only when it is
                                        lower and the test against the champion gives p < alpha (no champion: it is
                                        promoted, there is none to beat)
    the record                          a run in the experiment `production`, tagged mamba_tune.objective: params
                                        (versions, bars, alpha, objective, champion_objective), metrics
                                        (loss_challenger_<objective>, loss_champion_<objective>,
                                        loss_har_<objective>, loss_persistence_<objective>, n_scored,
                                        dm_stat_champion, dm_pvalue_champion, dm_stat_har, dm_pvalue_har), the bars as
                                        its evaluation dataset, a PNG of both forecasts against the target

The writes come in an order that leaves the registry consistent wherever a crash stops them, the @champion alias
and the promote run's tags agreeing: (1) the run, tagged PROMOTED_TAG=pending, and its record; (2) the alias moved,
when the challenger won; (3) the verdict, PROMOTED_TAG True or False with its note, in one write; (4) the run
FINISHED. A crash before (2) leaves the alias as it was and the run pending; one after it, the alias moved and the
run pending: a pending run claims nothing, and the alias is the truth. A run says True only once the alias names its
challenger, and never ends FINISHED before it says which.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from model.bars import Bars
from model.comparison import Comparison, compare_forecasts
from model.verdict import overlap, versus
from tuning.errors import UsageError
from tuning.tracking.lineage import bars_input, dataset_input
from tuning.tracking.objective import OBJECTIVE_TAG, metric_key, recorded_objective, title
from tuning.tracking.registry import DEFAULT_EXPERIMENT, FIRST_BAR_TAG, LAST_BAR_TAG, bars_frame, mlflow_settings
from tuning.tracking.store import TrackingStore

CHAMPION, CHALLENGER = "champion", "challenger"
PROMOTED_TAG, PENDING = "mamba_tune.promoted", "pending"  # the promote run's verdict: pending, then True or False
NOTE_TAG = "mlflow.note.content"  # the run's description in MLflow's UI: the verdict in words


@dataclass(frozen=True)
class Contender:
    alias: str
    version: str
    run_id: str
    target: str
    horizon: int
    first_bar: int | None  # ns, UTC: the first and last bar of the data it trained on, as recorded at its
    last_bar: int  # registration (a version registered before the first bar was recorded: None)
    objective: str = "mse_log"  # what it was chosen by: its tag mamba_tune.objective, else its target's default


@dataclass(frozen=True)
class Versus:
    """The Diebold-Mariano test of the challenger's per-sample losses against a reference's, on the scored samples."""

    stat: float  # < 0: the challenger's errors are the smaller; NaN where the test cannot be made
    pvalue: float  # two-sided; NaN where the test cannot be made


@dataclass(frozen=True)
class Verdict:
    challenger: Contender
    champion: Contender | None
    comparison: Comparison
    promoted: bool
    run_id: str
    versus: dict[str, Versus]  # CHAMPION (when there is one) and "har" -> the challenger tested against it
    alpha: float | None = None  # the level the challenger had to beat the champion at (None: a lower loss is enough)

    @property
    def objective(self) -> str:
        """What every loss of the comparison is in: the challenger's objective."""
        return self.challenger.objective


def challenger_tests(comparison: Comparison, target: str, horizon: int) -> dict[str, Versus]:
    """The challenger tested against the champion (when there is one) and HAR, on the scored samples: model/verdict.py's
    versus, over the bars each target overlaps (overlap), its statistic and p-value (NaN where the test cannot be
    made: too few samples for the horizon, a non-finite error; the losses still stand)."""
    errors = comparison.per_sample  # each (n_scored,): the objective's per-sample losses
    tests = {}
    for reference in (CHAMPION, "har"):
        if reference in errors:
            judged = versus(errors[CHALLENGER], errors[reference], overlap(target, horizon))
            tests[reference] = Versus(judged["dm_stat"], judged["dm_pvalue"])
    return tests


def contenders(client: Any, name: str) -> tuple[Contender, Contender | None]:
    """MODEL@challenger (required) and MODEL@champion (None before the first promote)."""
    from mlflow.exceptions import MlflowException

    found = {}
    for alias in (CHALLENGER, CHAMPION):
        try:
            version = client.get_model_version_by_alias(name, alias)
        except MlflowException:
            continue
        params = client.get_run(version.run_id).data.params
        found[alias] = Contender(alias, version.version, version.run_id, params["data.target"],
                                 int(params["data.horizon"]), *_trained_range(name, alias, version),
                                 recorded_objective(version.tags, params["data.target"]))
    if CHALLENGER not in found:
        raise UsageError(f"model {name!r} has no version aliased {CHALLENGER}; register one with `mamba-tune best "
                         f"SWEEP --register {name}` (or train --register and --alias)")
    challenger, champion = found[CHALLENGER], found.get(CHAMPION)
    if champion is not None and (champion.target, champion.horizon) != (challenger.target, challenger.horizon):
        raise UsageError(f"{name}@{CHALLENGER} forecasts {challenger.target} over {challenger.horizon} bars and "
                         f"@{CHAMPION} {champion.target} over {champion.horizon}: they cannot be compared; register "
                         "a challenger with the champion's target and horizon")
    return challenger, champion


def _trained_range(name: str, alias: str, version: Any) -> tuple[int | None, int]:
    """The first and last bar (ns) of the data the version trained on, as its tags recorded them at registration
    (the first is None for a version registered before it was recorded: the rule needs only the last)."""
    if LAST_BAR_TAG not in version.tags:
        fix = ("register a new challenger" if alias == CHALLENGER else f"delete its alias {CHAMPION} in MLflow, so "
               "that the next promote makes the challenger the champion")
        raise UsageError(f"{name}@{alias} (version {version.version}) does not record the last bar it trained on "
                         f"(tag {LAST_BAR_TAG}); {fix}")
    first = version.tags.get(FIRST_BAR_TAG)
    return (int(first) if first is not None else None), int(version.tags[LAST_BAR_TAG])


def require_new_bars(bars: Bars, name: str, *versions: Contender | None) -> None:
    """Every one of the bars (their timestamps strictly increase: the first) must come after the last bar any of
    `versions` trained on."""
    for v in versions:
        if v is not None and bars.timestamp[0] <= v.last_bar:
            raise UsageError(f"--data {bars.path}: its first bar ({_when(bars.timestamp[0])}) is not after the last "
                             f"bar {name}@{v.alias} (version {v.version}) trained on ({_when(v.last_bar)}"
                             f"{_since(v.first_bar)}); promote on bars that came after the data of both models")


def check_alpha(alpha: float | None) -> None:
    """UsageError unless `alpha` is None or a significance level, 0 < alpha < 1."""
    if alpha is not None and not 0 < alpha < 1:  # NaN is not inside either
        raise UsageError(f"--alpha {alpha:g}: a significance level must be between 0 and 1, both excluded; pass one "
                         "such as 0.05")


def promote(store: TrackingStore, name: str, bars: Bars, experiment: str = DEFAULT_EXPERIMENT,
            alpha: float | None = None) -> Verdict:
    """Compare, record the comparison run, and move @champion to the challenger when it is better (or when
    there is no champion); with `alpha` (0 < alpha < 1), better means a lower loss with a Diebold-Mariano p-value
    below alpha. The writes in the order the module's docstring gives."""
    check_alpha(alpha)
    import mlflow
    from mlflow.entities import RunTag

    client = store.client()
    challenger, champion = contenders(client, name)
    require_new_bars(bars, name, challenger, champion)
    frame = bars_frame(bars)
    forecasts = {}
    with mlflow_settings(store.uri):
        for v in (challenger, champion):
            if v is not None:
                predicted = _predict(mlflow.pyfunc.load_model(f"models:/{name}/{v.version}"), frame, bars, name, v)
                forecasts[v.alias] = (predicted["timestamp"].to_numpy().astype("datetime64[ns]").view(np.int64),
                                      predicted["prediction"].to_numpy(np.float64))
    try:
        comparison = compare_forecasts(bars, challenger.target, challenger.horizon, forecasts,
                                       objective=challenger.objective)  # HAR fitted as the objective fits it
    except ValueError as exc:
        raise UsageError(f"--data {bars.path}: {exc}; give more bars") from None
    tests = challenger_tests(comparison, challenger.target, challenger.horizon)
    promoted = champion is None or (comparison.losses[CHALLENGER] < comparison.losses[CHAMPION] and (
        alpha is None or tests[CHAMPION].pvalue < alpha))  # a NaN p-value is never below alpha
    run_id = _record(store, client, name, experiment, bars, challenger, champion, comparison, tests, alpha)  # (1)
    try:
        if promoted:
            client.set_registered_model_alias(name, CHAMPION, challenger.version)  # (2)
        client.log_batch(run_id, tags=[RunTag(PROMOTED_TAG, str(promoted)),  # (3)
                                       RunTag(NOTE_TAG, _verdict_line(name, challenger, champion, promoted,
                                                                      comparison, tests, alpha))])
    except BaseException:
        client.set_terminated(run_id, "FAILED")  # still pending: the alias says whether it moved
        raise
    client.set_terminated(run_id, "FINISHED")  # (4)
    return Verdict(challenger, champion, comparison, promoted, run_id, tests, alpha)


def _predict(model: Any, frame: Any, bars: Bars, name: str, version: Contender) -> Any:
    """The version's forecasts of the bars; bars it refuses (e.g. without the volume it was trained on) are one
    UsageError naming the version."""
    from mlflow.exceptions import MlflowException

    try:
        return model.predict(frame)
    except MlflowException as exc:
        if exc.error_code != "INVALID_PARAMETER_VALUE":
            raise
        raise UsageError(f"--data {bars.path}: {name}@{version.alias} (version {version.version}) cannot score these "
                         f"bars: {exc.message.splitlines()[0]}") from None


def _record(store: TrackingStore, client: Any, name: str, experiment: str, bars: Bars, challenger: Contender,
            champion: Contender | None, comparison: Comparison, tests: dict[str, Versus], alpha: float | None) -> str:
    """The promote run, its verdict pending: params, metrics, the bars as its dataset, the forecasts' plot."""
    from mlflow.entities import Metric, Param

    experiment_id = store.experiment_id(client, experiment)
    objective = challenger.objective
    run = client.create_run(experiment_id, run_name=f"promote {name}", tags={
        "mamba_tune.role": "promote", "mamba_tune.model": name, PROMOTED_TAG: PENDING, OBJECTIVE_TAG: objective})
    run_id = run.info.run_id
    params = {"model": name, "challenger_version": challenger.version, "data": str(Path(bars.path).resolve()),
              "champion_version": champion.version if champion else "none", "n_har_fit": str(comparison.n_fit),
              "target": challenger.target, "horizon": str(challenger.horizon),
              "alpha": "none" if alpha is None else str(alpha), "objective": objective,
              "champion_objective": champion.objective if champion else "none"}
    now = int(datetime.now(timezone.utc).timestamp() * 1000)
    metrics = [Metric(metric_key(f"loss_{k}", objective), v, now, 0) for k, v in comparison.losses.items()]
    metrics.append(Metric("n_scored", float(len(comparison.scored)), now, 0))
    metrics += [Metric(f"dm_{what}_{reference}", float(getattr(test, what)), now, 0)
                for reference, test in tests.items() for what in ("stat", "pvalue")]
    try:
        client.log_batch(run_id, metrics=metrics, params=[Param(k, v) for k, v in params.items()])
        client.log_inputs(run_id, [dataset_input(bars_input(bars.path), "evaluation")])
        with tempfile.TemporaryDirectory(prefix="mamba-tune-promote-") as folder:
            plot = _forecast_plot(bars, comparison, name, Path(folder) / "forecasts.png", objective)
            client.log_artifact(run_id, str(plot))
    except BaseException:
        client.set_terminated(run_id, "FAILED")  # the aliases stay as they were: nothing was promoted
        raise
    return run_id


def _verdict_line(name: str, challenger: Contender, champion: Contender | None, promoted: bool,
                  comparison: Comparison, tests: dict[str, Versus], alpha: float | None) -> str:
    if champion is None:
        return f"{name} version {challenger.version} is the champion: there was none"
    return _verdict(name, challenger, champion, promoted, comparison, tests, alpha) + _under(challenger, champion)


def _under(challenger: Contender, champion: Contender) -> str:
    """What the losses were: the challenger's objective, and the champion's where it was another."""
    if champion.objective == challenger.objective:
        return f" (losses: {title(challenger.objective)})"
    return (f" (losses: {title(challenger.objective)}, the challenger's objective; the champion was chosen by "
            f"{title(champion.objective)})")


def _verdict(name: str, challenger: Contender, champion: Contender, promoted: bool,
             comparison: Comparison, tests: dict[str, Versus], alpha: float | None) -> str:
    beyond = "" if alpha is None else f" beyond noise (DM p={tests[CHAMPION].pvalue:.3g} < alpha {alpha:g})"
    if promoted:
        return (f"{name} version {challenger.version} (challenger) beat version {champion.version}{beyond}: now the "
                "champion")
    if alpha is not None and comparison.losses[CHALLENGER] < comparison.losses[CHAMPION]:
        return (f"{name} version {champion.version} stays the champion: version {challenger.version}'s loss is lower, "
                f"not beyond noise (DM p={tests[CHAMPION].pvalue:.3g}, not below alpha {alpha:g})")
    return f"{name} version {champion.version} stays the champion: version {challenger.version} did not beat it"


def verdict_line(v: Verdict, name: str) -> str:
    return _verdict_line(name, v.challenger, v.champion, v.promoted, v.comparison, v.versus, v.alpha)


def _forecast_plot(bars: Bars, comparison: Comparison, name: str, path: Path, challenger_objective: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = bars.timestamp[comparison.scored].astype("datetime64[ns]")
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot(times, comparison.target, c="k", lw=1.2, label="target")
    for label in (CHAMPION, CHALLENGER, "har"):
        if label in comparison.forecasts:
            ax.plot(times, comparison.forecasts[label], lw=1, alpha=0.85,
                    label=f"{label} ({title(challenger_objective)} {comparison.losses[label]:.4g})")
    ax.set_title(f"{name}: forecasts on {len(comparison.scored)} new samples")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _since(first_bar: int | None) -> str:
    return "" if first_bar is None else f"; its bars began {_when(first_bar)}"


def _when(ns: int) -> str:
    return datetime.fromtimestamp(int(ns) / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
