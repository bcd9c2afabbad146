"""What users install is what is tested: the wheel, installed non-editable into a fresh venv outside the checkout,
runs every command from a folder that is not the checkout, with mamba-tune's own code from the wheel alone."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.bars import write_csv, yahoo_rows
from tests.packaging.fresh_env import ROOT, FreshEnv, build_wheel, checkout_files, fresh_env
from tests.tuning.cli.test_help import commands
from tuning.cli.data import arch_daily_bars
from tuning.cli.main import build_parser
from tuning.sweep_files import LEDGER, TEST_LOOK

SHIPPED = ("model/", "tuning/", "mamba_tune/", "search_spaces/")  # the checkout's folders whose files the wheel must hold


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> FreshEnv:
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    return fresh_env(tmp_path_factory.mktemp("fresh") / "venv", wheel)


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A folder that is not the checkout, for the commands' working folder."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    return tmp_path


def test_wheel_holds_every_module_and_shipped_space_of_the_checkout(installed):
    wanted = {name for name in checkout_files() if name.startswith(SHIPPED) and name.endswith((".py", ".yaml"))}
    site = installed.site_packages
    held = {path.relative_to(site).as_posix() for path in site.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}
    assert "tuning/bars_import/__init__.py" in wanted and not wanted - held, sorted(wanted - held)
    tops = {path.name for path in site.iterdir() if path.is_dir() and not path.name.endswith(".dist-info")}
    assert tops == {"model", "tuning", "mamba_tune", "search_spaces"}  # no tests/, bench/ or build leftovers


def test_wheel_modules_import_from_the_fresh_venv_alone(installed, elsewhere):
    packages = {name.rpartition("/")[0].replace("/", ".") for name in checkout_files()
                if name.startswith(SHIPPED) and name.endswith(".py")}
    modules = sorted(packages | {"tuning.cli.main", "tuning.cli.data", "tuning.search.shipped_spaces", "mamba_tune"})
    script = ("import importlib, json, sys\n"
              "found = {name: importlib.import_module(name) for name in sys.argv[1:]}\n"
              "print(json.dumps({name: m.__file__ or list(m.__path__)[0] for name, m in found.items()}))")
    done = installed.run("python", "-c", script, *modules, cwd=elsewhere)
    assert done.returncode == 0, done.stderr[-3000:]
    files = json.loads(done.stdout)
    assert {"model", "tuning", "tuning.bars_import", "search_spaces"} <= set(files)
    outside = {name: file for name, file in files.items()
               if not Path(file).is_relative_to(installed.site_packages) or Path(file).is_relative_to(ROOT)}
    assert not outside, outside


def test_wheel_cli_prints_its_version_and_every_commands_help(installed, elsewhere):
    done = installed.run("mamba-tune", "--version", cwd=elsewhere)
    assert done.returncode == 0 and done.stdout.strip() == f"mamba-tune {version('mamba-tune')}", done
    words = [path for path, _ in commands(build_parser())]  # every command and subcommand of the checkout's CLI
    assert {("data", "import"), ("space", "show"), ("sweep",)} <= set(words)
    with ThreadPoolExecutor(4) as pool:  # a process each, as a user runs them, a few at once
        helps = list(pool.map(lambda path: installed.run("mamba-tune", *path, "--help", cwd=elsewhere), words))
    for path, helped in zip(words, helps, strict=True):
        assert helped.returncode == 0 and helped.stdout.startswith(f"usage: mamba-tune {' '.join(path)}"), \
            (path, helped.stderr[-2000:])


def test_wheel_space_keys_and_show_of_a_shipped_space_by_name(installed, elsewhere):
    keys = installed.run("mamba-tune", "space", "keys", cwd=elsewhere)
    assert keys.returncode == 0 and "scheduler.max_epochs" in keys.stdout, keys.stderr[-2000:]
    shown = installed.run("mamba-tune", "space", "show", "smoke", cwd=elsewhere)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert f"# The search space {installed.site_packages / 'search_spaces' / 'smoke.yaml'}\n" in shown.stdout
    assert "\nname: smoke\n" in shown.stdout


def test_wheel_imports_a_csv_and_sweeps_two_trials_end_to_end(installed, elsewhere):
    sp500 = arch_daily_bars("sp500")
    write_csv(elsewhere / "SPY.csv", yahoo_rows(sp500.slice(sp500.num_rows - 1200)))  # Yahoo's export, 1,200 days
    imported = installed.run("mamba-tune", "data", "import", "SPY.csv", "--out", "bars.parquet",
                             cwd=elsewhere)
    assert imported.returncode == 0 and "wrote 1,200 bars to bars.parquet" in imported.stdout, imported.stderr
    swept = installed.run("mamba-tune", "sweep", "--data", "bars.parquet", "--space", "smoke", "--trials", "2",
                          "--set", "scheduler.max_epochs=2", "--set", "gate.epoch=1", "--set", "confirm.top_k=1",
                          "--storage", "sweeps", cwd=elsewhere, timeout=600)
    assert swept.returncode == 0, (swept.stdout[-3000:], swept.stderr[-3000:])
    assert re.search(r"test segment: winner [\d.]+ vs HAR [\d.]+", swept.stdout), swept.stdout[-3000:]
    trials = json.loads((elsewhere / "sweeps" / "smoke" / LEDGER).read_text())
    assert sum(trial["stage"] == "search" for trial in trials) == 2
    assert len(json.loads((elsewhere / "sweeps" / "smoke" / TEST_LOOK).read_text())) == 1  # scored once
