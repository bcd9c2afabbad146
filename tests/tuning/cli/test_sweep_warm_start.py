"""`sweep --warm-start`: bad input refused in one line, exit 2, before anything is written; `sweep --help` says what
each exit code means (the no-winner answer's among them). In process: nothing here starts Ray or reads bars."""

from __future__ import annotations

import optuna
import pytest
import yaml

from tests.tuning.sweep.test_warm_start import IDENTITY, SHA, new_space, other_sweep
from tests.tuning.sweeps import space_values
from tuning.cli.main import build_parser, main
from tuning.cli.sweep_warm_start import add_warm_start
from tuning.search.gate_verdict import NO_WINNER_EXIT
from tuning.sweep.warm_start import plan
from tuning.sweep_files import STUDY, sweep_paths


def sweep(tmp_path, *extra, space="smoke"):
    bars = tmp_path / "bars.parquet"
    bars.write_bytes(b"")  # never read: the warm start is refused first
    return main(["sweep", "--data", str(bars), "--space", str(space), "--storage", str(tmp_path / "sweeps"), *extra])


def listing(folder):
    return sorted(p.relative_to(folder) for p in folder.rglob("*"))


def one_line_error(capsys, starts):
    err = capsys.readouterr().err
    assert err.startswith(f"error: {starts}") and err.count("\n") == 1, err


def test_a_warm_start_from_a_sweep_that_does_not_exist_is_refused_and_nothing_written(tmp_path, capsys):
    (tmp_path / "sweeps").mkdir()
    assert sweep(tmp_path, "--warm-start", "nope") == 2
    one_line_error(capsys, "--warm-start nope: no sweep named 'nope' in ")
    assert listing(tmp_path / "sweeps") == []


def test_a_warm_start_from_a_disjoint_space_is_refused_and_nothing_written(tmp_path, capsys):
    other_sweep(tmp_path / "sweeps")
    before = listing(tmp_path / "sweeps")
    values = space_values()
    values.update(search={"model.n_layers": {"choices": [1, 2]}}, initial=[])
    values["run"]["model"].pop("n_layers")
    space = tmp_path / "layers.yaml"
    space.write_text(yaml.safe_dump(values))
    assert sweep(tmp_path, "--warm-start", "old", space=space) == 2
    one_line_error(capsys, "--warm-start old: it searched train.lr, train.weight_decay, train.batch_size and this "
                           "space searches model.n_layers: no setting in common")
    assert listing(tmp_path / "sweeps") == before


def test_the_other_storage_alone_is_refused(tmp_path, capsys):
    assert sweep(tmp_path, "--warm-start-storage", str(tmp_path)) == 2
    one_line_error(capsys, "--warm-start-storage says where the --warm-start sweep is; give --warm-start NAME too")


def test_sweep_and_resume_help_list_the_exit_codes_with_the_no_winner_answers():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.choices and "sweep" in a.choices).choices
    for name in ("sweep", "resume"):
        text = commands[name].format_help()
        assert "exit codes:" in text
        assert f"  {NO_WINNER_EXIT}    no trial passed the gate" in text
        assert "  130  interrupted" in text
    assert "--warm-start SWEEP" in commands["sweep"].format_help()


def test_a_warm_start_whose_study_cannot_be_read_is_refused_before_anything_is_written(tmp_path, capsys):
    other_sweep(tmp_path / "sweeps")
    (tmp_path / "sweeps" / "old" / STUDY).write_bytes(b"not a database" * 100)  # its plan would fail on reading
    before = listing(tmp_path / "sweeps")
    assert sweep(tmp_path, "--warm-start", "old") == 2
    one_line_error(capsys, "--warm-start old: its Optuna study (sqlite:///")
    assert listing(tmp_path / "sweeps") == before  # no folder, no study, no manifest of the new sweep


@pytest.mark.parametrize("folder_there", [False, True])
def test_adding_that_fails_leaves_no_study_so_the_same_sweep_can_run_again(tmp_path, monkeypatch, folder_there):
    warm = plan(other_sweep(tmp_path / "sweeps"), new_space(), SHA, IDENTITY)
    paths = sweep_paths(str(tmp_path / "sweeps"), "new")
    if folder_there:
        paths.folder.mkdir()

    def fails(study, trials):
        study.add_trial(trials[0])  # one added, then the database goes away
        raise RuntimeError("database is locked")

    monkeypatch.setattr(optuna.Study, "add_trials", fails)
    with pytest.raises(RuntimeError, match="database is locked"):
        add_warm_start(paths, warm)
    assert paths.folder.is_dir() == folder_there and not list(paths.folder.glob("*"))
    monkeypatch.undo()
    add_warm_start(paths, warm)  # run again: all of it is added
    assert len(optuna.load_study(study_name="new", storage=paths.study_url).trials) == 4
