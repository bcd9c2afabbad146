"""`promote` (tuning/tracking/promotion.py) on a real embedded MLflow store, with versions registered by hand (no
model is logged: stand-ins forecast for them), so that it runs in a second and each of its writes can fail in turn.

What is checked: the bars' guard compares timestamps with the ones each version recorded, never a file; and the
writes are ordered so that a crash between any two leaves the alias and the promote run's tags agreeing.
"""

from __future__ import annotations

import itertools
import shutil

import mlflow
import mlflow.pyfunc  # the module itself, not MLflow's lazy stand-in: the stand-ins patch it
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
from mlflow.entities import Param
from mlflow.exceptions import MlflowException

from model.bars import read_bars
from model.features import target_and_persistence
from model.synth import synth_bars
from tuning.errors import UsageError
from tuning.tracking.promotion import promote
from tuning.tracking.store import TrackingStore, open_store, resolve_store

TARGET, HORIZON = "volatility", 6
FIRST, LAST = "mamba_tune.data_first_bar_ns", "mamba_tune.data_last_bar_ns"
WRITES = ("create_", "log_", "set_", "delete_", "update_", "rename_", "transition_")  # MlflowClient's writing calls
names = (f"mt-promotion-{i}" for i in itertools.count())  # a registered model of its own for each promote


class StandIn:
    """A version's forecasts: the target itself plus `offset` (its MSE is offset squared)."""

    def __init__(self, offset: float):
        self.offset = offset

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        close, high, low = (frame[c].to_numpy(np.float64) for c in ("close", "high", "low"))
        actual, _ = target_and_persistence(close, np.log(high) - np.log(low), TARGET, HORIZON)
        return pd.DataFrame({"timestamp": frame["timestamp"], "prediction": actual + self.offset})


class Died(Exception):
    """The promoting process died here."""


class DiesAtWrite:
    """An MlflowClient whose `k`-th write, and every one after it, fails: the process died at that write."""

    def __init__(self, client, k: float):
        self.client, self.k, self.writes = client, k, 0

    def __getattr__(self, name: str):
        call = getattr(self.client, name)
        if not name.startswith(WRITES):
            return call

        def write(*args, **kwargs):
            self.writes += 1
            if self.writes >= self.k:
                raise Died(f"write {self.writes} ({name})")
            return call(*args, **kwargs)
        return write


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> TrackingStore:
    store = resolve_store(f"sqlite:///{tmp_path_factory.mktemp('promotion') / 'mlflow.db'}")
    store.experiment_id(open_store(store), "production")  # made once: then a promote's writes are all its own
    return store


@pytest.fixture(scope="module")
def trained_on(tmp_path_factory):
    """The bars the versions trained on, and new bars: the same synthetic series 30 days later."""
    folder = tmp_path_factory.mktemp("bars")
    table = synth_bars(600, seed=3)
    pq.write_table(table, folder / "bars.parquet")
    later = pc.add(table.column("timestamp"), pa.scalar(30 * 86_400 * 10**9, pa.duration("ns")))
    pq.write_table(table.set_column(0, "timestamp", later), folder / "new.parquet")
    return read_bars(folder / "bars.parquet"), read_bars(folder / "new.parquet")


@pytest.fixture()
def offsets(monkeypatch) -> dict[str, float]:
    """Version -> its stand-in's offset; mlflow.pyfunc.load_model("models:/NAME/VERSION") gives the stand-in."""
    offsets: dict[str, float] = {}
    monkeypatch.setattr(mlflow.pyfunc, "load_model", lambda uri: StandIn(offsets[uri.rsplit("/", 1)[1]]))
    return offsets


def register(store: TrackingStore, name: str, alias: str, tags: dict[str, str], run_tags: dict[str, str] | None = None
             ) -> str:
    """A new version of `name`, aliased `alias`, whose run forecasts TARGET over HORIZON bars; -> its number."""
    client = store.client()
    run_id = client.create_run(client.get_experiment_by_name("production").experiment_id, tags=run_tags).info.run_id
    client.log_batch(run_id, params=[Param("data.target", TARGET), Param("data.horizon", str(HORIZON))])
    client.set_terminated(run_id)
    try:
        client.create_registered_model(name)
    except MlflowException:
        pass  # its second version
    version = client.create_model_version(name, f"runs:/{run_id}/model", run_id=run_id, tags=tags).version
    client.set_registered_model_alias(name, alias, version)
    return str(version)


def trained_range(bars) -> dict[str, str]:
    return {FIRST: str(bars.timestamp[0]), LAST: str(bars.timestamp[-1])}


def champion_of(store: TrackingStore, name: str) -> str | None:
    try:
        return str(store.client().get_model_version_by_alias(name, "champion").version)
    except MlflowException:
        return None


def promote_runs(store: TrackingStore, name: str) -> list:
    client = store.client()
    experiment = client.get_experiment_by_name("production").experiment_id
    return client.search_runs([experiment], f"tags.`mamba_tune.model` = '{name}'")


def test_promote_refuses_the_bars_a_version_trained_on_under_another_name(store, trained_on, offsets, tmp_path):
    bars, _ = trained_on
    name = next(names)
    register(store, name, "challenger", trained_range(bars))
    copied = tmp_path / "fresh-bars-2031.parquet"
    shutil.copy(bars.path, copied)
    first, last = (pd.Timestamp(bars.timestamp[i], tz="UTC").strftime("%Y-%m-%d %H:%M:%S UTC") for i in (0, -1))
    with pytest.raises(UsageError, match=rf"^--data {copied}: its first bar \({first}\) is not after the last bar "
                                         rf"{name}@challenger \(version 1\) trained on \({last}; its bars began "
                                         rf"{first}\); promote on bars"):
        promote(store, name, read_bars(copied))
    assert promote_runs(store, name) == [] and champion_of(store, name) is None  # nothing written


@pytest.mark.parametrize("alias", ["challenger", "champion"])
def test_promote_refuses_a_version_without_its_last_bar_even_when_its_data_file_is_there(
        alias, store, trained_on, offsets):
    bars, new = trained_on
    name = next(names)
    offsets.update({"1": 0.0, "2": 0.0})
    for registering in ("champion", "challenger"):  # its run names the file it trained on, still there
        register(store, name, registering, {} if registering == alias else trained_range(bars),
                 {"mamba_tune.data": str(bars.path)})
    fix = "register a new challenger" if alias == "challenger" else "delete its alias champion in MLflow, so that"
    with pytest.raises(UsageError, match=rf"^{name}@{alias} \(version {'2' if alias == 'challenger' else '1'}\) does "
                                         rf"not record the last bar it trained on \(tag {LAST}\); {fix}"):
        promote(store, name, new)
    assert promote_runs(store, name) == [] and champion_of(store, name) == "1"


def test_promote_takes_a_version_registered_before_its_first_bar_was_recorded(store, trained_on, offsets):
    bars, new = trained_on
    name = next(names)
    offsets.update({"1": 1.0})
    register(store, name, "challenger", {LAST: str(bars.timestamp[-1])})  # its last bar alone: the rule needs no more
    assert promote(store, name, new).promoted and champion_of(store, name) == "1"
    with pytest.raises(UsageError, match=rf"trained on \({pd.Timestamp(bars.timestamp[-1], tz='UTC'):%Y-%m-%d %H:%M:%S} "
                                         rf"UTC\); promote on bars"):
        promote(store, name, bars)


@pytest.mark.parametrize("winner", ["challenger", "champion"])
def test_promote_leaves_the_alias_and_the_run_agreeing_whichever_write_it_dies_at(
        winner, store, trained_on, offsets, monkeypatch):
    bars, new = trained_on
    offsets.update({"1": 0.0 if winner == "champion" else 1.0, "2": 0.0 if winner == "challenger" else 1.0})
    dying: list[DiesAtWrite] = []  # the client each promote was given

    def promote_dying_at(k: float) -> str:
        """Version 1 the champion, version 2 the challenger; promote, dying at write k; -> the model's name."""
        name = next(names)
        for alias in ("champion", "challenger"):
            register(store, name, alias, trained_range(bars))
        real = TrackingStore.client

        def dies_at_write_k(self: TrackingStore) -> DiesAtWrite:
            dying.append(DiesAtWrite(real(self), k))
            return dying[-1]

        with monkeypatch.context() as patched:
            patched.setattr(TrackingStore, "client", dies_at_write_k)
            try:
                promote(store, name, new)
            except Died:
                pass
        return name

    whole = promote_dying_at(float("inf"))
    n_writes = dying[-1].writes
    after = "2" if winner == "challenger" else "1"
    assert champion_of(store, whole) == after and n_writes >= 4
    for k in range(1, n_writes + 1):
        name = promote_dying_at(k)
        champion, runs = champion_of(store, name), promote_runs(store, name)
        assert len(runs) <= 1, k
        if not runs:
            assert champion == "1", k  # the alias moves only once a run records why
            continue
        tags, status = runs[0].data.tags, runs[0].info.status
        verdict = tags["mamba_tune.promoted"]
        assert (verdict, champion) in {("pending", "1"), ("pending", "2"), ("True", "2"), ("False", "1")}, (k, verdict,
                                                                                                          champion)
        assert verdict == "pending" or champion == after, k
        note = tags.get("mlflow.note.content", "")  # the verdict in words, once the run has one
        assert not note or ("stays the champion" in note) == (champion == "1"), (k, note, champion)
        assert status != "FINISHED" or verdict != "pending", k


class NoisyStandIn:
    """A version's forecasts: the target plus seeded Gaussian noise of standard deviation `sigma`."""

    def __init__(self, sigma: float, seed: int):
        self.sigma, self.seed = sigma, seed

    def predict(self, frame: pd.DataFrame) -> pd.DataFrame:
        actual = StandIn(0.0).predict(frame)["prediction"].to_numpy()
        noise = np.random.default_rng(self.seed).standard_normal(len(frame))
        return pd.DataFrame({"timestamp": frame["timestamp"], "prediction": actual + self.sigma * noise})


@pytest.fixture()
def noisy(monkeypatch) -> dict[str, NoisyStandIn]:
    """Version -> its noisy stand-in; mlflow.pyfunc.load_model("models:/NAME/VERSION") gives it."""
    versions: dict[str, NoisyStandIn] = {}
    monkeypatch.setattr(mlflow.pyfunc, "load_model", lambda uri: versions[uri.rsplit("/", 1)[1]])
    return versions


def champion_and_challenger(store: TrackingStore, bars) -> str:
    """A model whose version 1 is the champion and version 2 the challenger; -> its name."""
    name = next(names)
    for alias in ("champion", "challenger"):
        register(store, name, alias, trained_range(bars))
    return name


def test_promote_records_the_diebold_mariano_test_against_the_champion_and_har(store, trained_on, noisy):
    """The challenger's squared errors tested against the champion's and HAR's on the scored samples: in the
    verdict and in the promote run (metrics dm_stat_*, dm_pvalue_*, param alpha); without alpha a lower loss still
    promotes, however small."""
    from model.diebold_mariano import diebold_mariano

    bars, new = trained_on
    noisy.update({"1": NoisyStandIn(1.0, seed=1), "2": NoisyStandIn(0.95, seed=2)})  # barely better: noise
    name = champion_and_challenger(store, bars)
    verdict = promote(store, name, new)
    c = verdict.comparison
    assert c.losses["challenger"] < c.losses["champion"] and verdict.promoted and champion_of(store, name) == "2"
    errors = {k: (f - c.target) ** 2 for k, f in c.forecasts.items()}
    expected = {k: diebold_mariano(errors["challenger"], errors[k], HORIZON) for k in ("champion", "har")}
    assert set(verdict.versus) == {"champion", "har"}
    for k, test in expected.items():
        torch.testing.assert_close(torch.tensor([verdict.versus[k].stat, verdict.versus[k].pvalue]),
                                   torch.tensor([test.stat, test.pvalue]))
    assert verdict.versus["champion"].pvalue > 0.05  # the noise this test's alpha needs
    run = promote_runs(store, name)[0]
    torch.testing.assert_close(
        torch.tensor([run.data.metrics[f"dm_{what}_{k}"] for k in ("champion", "har") for what in ("stat", "pvalue")]),
        torch.tensor([getattr(expected[k], what) for k in ("champion", "har") for what in ("stat", "pvalue")]))
    assert run.data.params["alpha"] == "none"


def test_promote_with_alpha_promotes_only_a_challenger_better_beyond_noise(store, trained_on, noisy):
    bars, new = trained_on
    noisy.update({"1": NoisyStandIn(1.0, seed=1), "2": NoisyStandIn(0.95, seed=2)})  # lower loss, p > 0.05
    name = champion_and_challenger(store, bars)
    kept = promote(store, name, new, alpha=0.05)
    assert kept.comparison.losses["challenger"] < kept.comparison.losses["champion"]
    assert not kept.promoted and champion_of(store, name) == "1"
    run = promote_runs(store, name)[0]
    assert run.data.params["alpha"] == "0.05" and run.data.tags["mamba_tune.promoted"] == "False"
    assert f"{name} version 1 stays the champion: version 2's loss is lower, not beyond noise (DM p=" in \
        run.data.tags["mlflow.note.content"]

    noisy.update({"1": NoisyStandIn(1.0, seed=1), "2": NoisyStandIn(0.5, seed=2)})  # far better: beyond noise
    name = champion_and_challenger(store, bars)
    won = promote(store, name, new, alpha=0.05)
    assert won.versus["champion"].stat < 0 and won.versus["champion"].pvalue < 0.05
    assert won.promoted and champion_of(store, name) == "2"


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_promote_alpha_outside_0_1_is_refused_before_any_write(store, trained_on, noisy, alpha):
    bars, new = trained_on
    noisy.update({"1": NoisyStandIn(1.0, seed=1), "2": NoisyStandIn(0.5, seed=2)})
    name = champion_and_challenger(store, bars)
    with pytest.raises(UsageError, match=r"^--alpha .*: a significance level must be between 0 and 1, both "
                                         r"excluded; pass one such as 0\.05$"):
        promote(store, name, new, alpha=alpha)
    assert promote_runs(store, name) == [] and champion_of(store, name) == "1"


def test_cli_promote_alpha_outside_0_1_is_one_line_exit_2(tmp_path):
    from tests.cli import assert_one_line_error, run_cli

    done = run_cli("promote", "mt-any", "--data", tmp_path / "new.parquet", "--alpha", "1.5",
                   "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert_one_line_error(done, "--alpha 1.5: a significance level must be between 0 and 1, both excluded")
    assert list(tmp_path.iterdir()) == []


def test_cli_promote_prints_the_diebold_mariano_tests_and_with_alpha_keeps_a_champion_not_beaten_beyond_noise(
        store, trained_on, noisy, capsys):
    from tuning.cli.main import main

    bars, new = trained_on
    noisy.update({"1": NoisyStandIn(1.0, seed=1), "2": NoisyStandIn(0.95, seed=2)})  # lower loss, p > 0.05
    name = champion_and_challenger(store, bars)
    assert main(["promote", name, "--data", str(new.path), "--tracking-uri", store.uri, "--alpha", "0.05"]) == 0
    printed = capsys.readouterr().out
    run = promote_runs(store, name)[0]
    for label, key in (("champion", "champion"), ("HAR", "har")):
        stat, pvalue = run.data.metrics[f"dm_stat_{key}"], run.data.metrics[f"dm_pvalue_{key}"]
        assert f"  challenger vs {label:<12} Diebold-Mariano stat {stat:+.3f}, p {pvalue:.3g}\n" in printed
    assert f"{name} version 1 stays the champion: version 2's loss is lower, not beyond noise (DM p=" in printed
    assert champion_of(store, name) == "1"


def test_challenger_tests_are_model_verdicts_versus_over_the_targets_overlap():
    """promote's tests are the sweep's (model/verdict.py versus), over the bars each target overlaps; NaN, never
    an error, where a test cannot be made."""
    from types import SimpleNamespace

    from model.verdict import versus
    from tuning.tracking.promotion import challenger_tests

    rng = np.random.default_rng(3)
    target = rng.standard_normal(300)
    forecasts = {"challenger": target + 0.3 * rng.standard_normal(300),
                 "champion": target + 0.35 * rng.standard_normal(300), "har": target + 0.5 * rng.standard_normal(300)}
    errors = {k: (f - target) ** 2 for k, f in forecasts.items()}
    comparison = SimpleNamespace(target=target, forecasts=forecasts, per_sample=errors)  # mse's losses
    for kind, horizon, over in (("realized_vol", 6, 6), ("close", 6, 1)):
        tests = challenger_tests(comparison, kind, horizon)
        assert set(tests) == {"champion", "har"}
        for reference, test in tests.items():
            judged = versus(errors["challenger"], errors[reference], over)
            torch.testing.assert_close(torch.tensor([test.stat, test.pvalue], dtype=torch.float64),
                                       torch.tensor([judged["dm_stat"], judged["dm_pvalue"]], dtype=torch.float64))
    few = SimpleNamespace(target=target[:4], forecasts={k: f[:4] for k, f in forecasts.items() if k != "champion"},
                          per_sample={k: e[:4] for k, e in errors.items() if k != "champion"})
    (only,) = challenger_tests(few, "realized_vol", 6).values()  # 4 samples, a 6-bar horizon: no test
    assert np.isnan(only.stat) and np.isnan(only.pvalue)


def test_promote_reads_versions_registered_before_objectives_as_mse_log_and_records_its_objective(
        store, trained_on, noisy):
    """Versions without the tag mamba_tune.objective (registered before objectives) are a volatility target's
    default, mse_log: the promote run says so (tag, param) and keys its losses loss_<name>_mse_log."""
    bars, new = trained_on
    noisy.update({"1": NoisyStandIn(1.0, seed=1), "2": NoisyStandIn(0.5, seed=2)})
    name = champion_and_challenger(store, bars)
    verdict = promote(store, name, new)
    assert (verdict.objective, verdict.champion.objective) == ("mse_log", "mse_log")
    run = promote_runs(store, name)[0]
    assert run.data.tags["mamba_tune.objective"] == "mse_log"
    assert (run.data.params["objective"], run.data.params["champion_objective"]) == ("mse_log", "mse_log")
    logged = {k: run.data.metrics[f"loss_{k}_mse_log"] for k in ("challenger", "champion", "har", "persistence")}
    torch.testing.assert_close(logged, verdict.comparison.losses)
    assert not any(key.startswith("mse_") for key in run.data.metrics)  # no key shared with another objective
    assert run.data.tags["mlflow.note.content"].endswith("(losses: MSE of log volatility)")


def test_promote_scores_a_champion_of_another_objective_by_the_challengers(store, trained_on, noisy, capsys):
    """A challenger chosen by QLIKE against a champion of MSE of log volatility: both scored by QLIKE (documented
    in docs/winner.md), said in the verdict and the printed lines, recorded under the QLIKE keys."""
    from tuning.cli.main import main

    bars, new = trained_on
    noisy.update({"1": NoisyStandIn(1.0, seed=1), "2": NoisyStandIn(0.5, seed=2)})
    name = next(names)
    register(store, name, "champion", trained_range(bars))  # before objectives: mse_log
    register(store, name, "challenger", {**trained_range(bars), "mamba_tune.objective": "qlike"})
    assert main(["promote", name, "--data", str(new.path), "--tracking-uri", store.uri]) == 0
    printed = capsys.readouterr().out
    run = promote_runs(store, name)[0]
    assert run.data.tags["mamba_tune.objective"] == "qlike" and run.data.params["champion_objective"] == "mse_log"
    assert {f"loss_{k}_qlike" for k in ("challenger", "champion", "har", "persistence")} <= set(run.data.metrics)
    assert not any(key.endswith("_mse_log") for key in run.data.metrics)
    assert "QLIKE (qlike, the challenger's objective); the champion was chosen by MSE of log volatility:" in printed
    assert run.data.tags["mlflow.note.content"].endswith(
        "(losses: QLIKE, the challenger's objective; the champion was chosen by MSE of log volatility)")
    losses = {k: run.data.metrics[f"loss_{k}_qlike"] for k in ("challenger", "champion")}
    assert run.data.tags["mamba_tune.promoted"] == str(losses["challenger"] < losses["champion"])
