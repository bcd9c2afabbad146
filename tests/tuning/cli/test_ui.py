"""`mamba-tune ui` in a real browser: headless Debian chromium driven by Playwright (integration)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from mlflow import MlflowClient
from playwright.sync_api import sync_playwright

from tests.cli import ROOT, cli_command, cli_env
from tests.tuning.mlflow_server import free_port
from tests.tuning.sweeps import ledger

pytestmark = pytest.mark.integration
CHROMIUM = "/usr/bin/chromium"  # Debian's package; `make test` installs it
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]  # no calls to a closed network
SCREENSHOTS = Path(os.environ.get("MAMBA_TUNE_SCREENSHOTS", ROOT / "runs" / "screenshots"))


@pytest.fixture()
def ui(finished_sweep):
    """`mamba-tune ui t` over the finished sweep's store on a free port; -> (url, experiment id, client, the sweep's
    page it printed)."""
    _, _, uri, _ = finished_sweep
    port = free_port()
    process = subprocess.Popen(cli_command("ui", "t", "--tracking-uri", uri, "--port", port), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=ROOT, env=cli_env(), start_new_session=True)
    try:
        first = process.stdout.readline()
        assert first.strip() == f"MLflow UI: http://127.0.0.1:{port}", (first, process.stderr.read()[-2000:])
        lines = [process.stdout.readline().strip() for _ in range(3)]  # store, Ctrl-C, the sweep's page
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("t").experiment_id
        assert lines[2] == f"sweep t: http://127.0.0.1:{port}/#/experiments/{experiment}/runs", lines
        yield f"http://127.0.0.1:{port}", experiment, client, lines[2].removeprefix("sweep t: ")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def test_ui_lists_the_sweep_with_its_nested_trials_and_charts_a_trial_val_loss(ui, finished_sweep):
    url, experiment, client, sweep_page = ui
    _, storage, _, _ = finished_sweep
    records = ledger(storage / "t")
    trial_id = next(k for k, r in records.items() if r["stop_reason"] == "completed")
    trial_run = client.search_runs([experiment], f"tags.trial_id = '{trial_id}'")[0]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(sweep_page)  # the page `mamba-tune ui t` printed: the sweep's runs
        page.get_by_text("t sweep").wait_for(timeout=60_000)
        page.get_by_role("button", name="Close", exact=True).click()  # MLflow's assistant panel
        page.get_by_role("row").filter(has_text="t sweep").locator(
            "button[data-component-id*='runnamecellrenderer']").first.click()  # expand the nested runs
        for trial in records:
            page.get_by_text(f"{trial} lr ").wait_for(timeout=30_000)
        page.screenshot(path=SCREENSHOTS / "experiment.png")

        page.goto(f"{url}/#/experiments/{experiment}/runs/{trial_run.info.run_id}/model-metrics")
        metric = f"val_loss_{trial_run.data.tags['mamba_tune.objective']}"  # one key per objective: val_loss_mse_log
        page.get_by_placeholder("Search metric charts").fill(metric)
        page.get_by_text(f"{trial_run.info.run_name} ({metric})").first.wait_for(timeout=60_000)  # the chart's legend
        page.locator("path.js-line").first.wait_for(state="attached", timeout=60_000)  # a drawn curve, not a spinner
        page.screenshot(path=SCREENSHOTS / "trial-metrics.png")
        browser.close()
    assert (SCREENSHOTS / "experiment.png").stat().st_size > 10_000
