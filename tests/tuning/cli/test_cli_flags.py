"""The flags people reach for: `sweep --sampler/--trials/--max-epochs/--precision`, each the same as its --set; a
flag given to a command that lacks it names the command(s) that have it; an invalid choice is the flag's error.
Parse-only: nothing here starts Ray or reads bars."""

from __future__ import annotations

import re

import pytest

import tuning.cli.sweep as sweep_cli
from tuning.errors import UsageError
from tuning.search.space import parse_space

SWEEP = ["sweep", "--data", "no-bars.parquet", "--space", "smoke", "--storage", "unused"]


class _Read(Exception):
    """Raised in place of parse_space once the space's values are read: the sweep goes no further."""


def _space_values(monkeypatch, extra: list[str]) -> tuple[dict, str]:
    """The values (and the source line) `sweep` would validate for SWEEP + `extra`."""
    from tuning.cli.main import main

    seen = []

    def reading(values, source, **_):
        seen.append((values, source))
        raise _Read

    monkeypatch.setattr(sweep_cli, "parse_space", reading)
    with pytest.raises(_Read):
        main([*SWEEP, *extra])
    return seen[0]


def test_each_setting_flag_is_the_same_as_its_set(monkeypatch):
    flagged, source = _space_values(monkeypatch, ["--sampler", "random", "--trials", "3", "--max-epochs", "4",
                                                  "--precision", "bf16"])
    by_set, _ = _space_values(monkeypatch, ["--set", "sampler=random", "--set", "trials=3",
                                            "--set", "scheduler.max_epochs=4", "--set", "run.train.precision=bf16"])
    space = parse_space(flagged, source)
    assert space == parse_space(by_set, source)
    assert (space.sampler, space.trials, space.scheduler.max_epochs, space.run.train.precision) == \
        ("random", 3, 4, "bf16")
    assert source.endswith("smoke.yaml (with --sampler random --trials 3 --max-epochs 4 --precision bf16)")


@pytest.mark.parametrize(("extra", "match"), [
    (["--trials", "3", "--set", "trials=4"], "--trials and --set trials both set trials; --trials is the same as "
                                             "--set trials=VALUE: give one of them"),
    (["--max-epochs", "3", "--set", " scheduler . max_epochs=4"], "--max-epochs and --set scheduler . max_epochs "
                                                                  "both set scheduler.max_epochs"),
    (["--set", "train.precision=fp32", "--precision", "bf16"], "--precision and --set train.precision both set "
                                                               "train.precision"),
], ids=["trials", "max epochs, spaced", "precision, either spelling"])
def test_a_setting_given_by_its_flag_and_by_set_is_refused(extra, match, capsys):
    from tuning.cli.main import main

    assert main([*SWEEP, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {match}") and err.count("\n") == 1, err


@pytest.mark.parametrize(("extra", "match"), [
    (["--trials", "0"], r"smoke\.yaml \(with --trials 0\): trials must be a positive integer, got 0$"),
    (["--max-epochs", "1"], r"smoke\.yaml \(with --max-epochs 1\): gate\.epoch 2 is beyond scheduler\.max_epochs 1"),
    (["--sampler", "sobol"], r"^error: --sampler sobol: not one of its choices, tpe, random, gp, cmaes or grid; give "
                             r"one of them; see `mamba-tune sweep --help`$"),
    (["--trials", "1"], r"smoke\.yaml \(with --trials 1\): confirm\.top_k 2 is more than the 1 trials"),
    (["--precision", "fp16"], r"^error: --precision fp16: not one of its choices, fp32 or bf16; give one of them; "
                              r"see `mamba-tune sweep --help`$"),
])
def test_a_bad_flag_value_is_refused_by_the_space_or_the_flag_itself(extra, match, capsys):
    from tuning.cli.main import main

    assert main([*SWEEP, *extra]) == 2
    err = capsys.readouterr().err.rstrip("\n")
    assert re.search(match, err) and "\n" not in err, err


@pytest.mark.parametrize(("args", "said"), [
    ([*SWEEP, "--epoch-unit", "s"], "error: --epoch-unit is an option of `mamba-tune data import`, not of "
                                    "`mamba-tune sweep`; see `mamba-tune sweep --help`"),
    (["list", "--dashboard"], "error: --dashboard is an option of `mamba-tune sweep` and `mamba-tune resume`, not of "
                              "`mamba-tune list`; see `mamba-tune list --help`"),
    (["space", "show", "smoke", "--trials=4"], "error: --trials is an option of `mamba-tune sweep` and "
                                               "`mamba-tune resume`, not of `mamba-tune space show`"),
    ([*SWEEP, "--storag", "x"], "error: unrecognized arguments: --storag x; see `mamba-tune sweep --help`; did you "
                                "mean --storage?"),
    (["data", "check", "b.parquet", "--frobnicate"], "error: unrecognized arguments: --frobnicate; see "
                                                     "`mamba-tune data check --help`"),
], ids=["data import's flag", "two commands' flag", "flag=value", "a typo", "no command's flag"])
def test_a_flag_the_command_lacks_names_the_commands_that_have_it(args, said, capsys):
    from tuning.cli.main import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(said) and err.count("\n") == 1, err


def test_with_flag_sets_puts_the_flags_after_the_set_pairs():
    from tuning.cli.sweep_flags import with_flag_sets

    flags = [("--trials", "trials", 5), ("--precision", "train.precision", "bf16")]
    assert with_flag_sets(["seed=1"], flags) == ["seed=1", "trials=5", "train.precision=bf16"]
    with pytest.raises(UsageError, match="--precision and --set run.train.precision both set train.precision"):
        with_flag_sets(["run.train.precision=fp32"], flags)


@pytest.mark.parametrize(("args", "here"), [
    ([*SWEEP, "--lr", "1e-3"], "--lr is an option of `mamba-tune train`, not of `mamba-tune sweep`; here: --set "
                               "train.lr=VALUE; see"),
    ([*SWEEP, "--epochs", "3"], "here: --set scheduler.max_epochs=VALUE"),
    (["space", "show", "smoke", "--batch-size", "64"], "here: --set train.batch_size=VALUE"),
], ids=["sweep --lr", "sweep --epochs", "space show --batch-size"])
def test_a_train_flag_given_where_a_space_is_read_names_its_set(args, here, capsys):
    from tuning.cli.main import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert here in err and err.count("\n") == 1, err


def test_column_goes_where_the_space_gives_data_columns(tmp_path):
    space = tmp_path / "older.yaml"
    space.write_text("run: {model: {d_model: 16}}\ndata: {columns: {open: o}}\n"
                     "search: {learning_rate: {low: 1.0e-4, high: 1.0e-3}}\n")
    values = sweep_cli._with_columns(sweep_cli.read_yaml(space, "search space"), {"close": "c"})
    assert values["data"]["columns"] == {"open": "o", "close": "c"} and "data" not in values["run"]
    assert parse_space(values, str(space)).run.data.columns == {"open": "o", "close": "c"}
