"""mamba-tune's tuning side: the flow of a sweep, one stage a package.

    cli/       one module per `mamba-tune` command; the only code that prints
    sweep/     a sweep session: manifest, the trial trainable, checkpoints, memory probe
    cluster/   doctor, node probe, the autoscaler's nodes, the shared-storage check
    tracking/  MLflow: store, typed writes, spool and sender, the sweep's runs, registry, plots
    search/    the space, the gate, GatedASHA, the Optuna searcher, the ledger, the best configuration
    bars_import/  users' own bars (CSV, Parquet of any layout) into the canonical Parquet (`data import`)
Imports go down this list (and to `model/`), never back. errors.py, yaml_io.py, progress.py,
sweep_files.py, bars_file.py and uri_secrets.py are shared by every stage.
"""

from tuning import _moved

_moved.install()  # sweeps saved by earlier versions name the modules of a flat tuning/
