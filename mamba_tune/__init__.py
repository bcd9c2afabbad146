"""mamba-tune from Python: the CLI's commands as functions, with its arguments and defaults, returning typed results
and raising typed errors instead of exiting (docs/python-api.md).

    import mamba_tune
    mamba_tune.synth_bars("bars.parquet", bars=3000)
    result = mamba_tune.sweep("bars.parquet", "smoke", trials=4)
    result.leaderboard          # a pandas DataFrame
"""

from mamba_tune.commands import best, import_bars, promote, resume, sweep, synth_bars, train
from mamba_tune.errors import CommandError, CommandFailed, InputError, Interrupted, NoWinner, UsageError
from mamba_tune.results import (
    BarsResult,
    BestResult,
    PromoteResult,
    RegisteredModel,
    SweepResult,
    TrainResult,
    Verdict,
)
from tuning.progress import EpochEnded, Note, TrialEnded, TrialStarted

__all__ = [
    # commands
    "sweep", "resume", "best", "train", "promote", "import_bars", "synth_bars",
    # results
    "SweepResult", "BestResult", "TrainResult", "PromoteResult", "BarsResult", "Verdict", "RegisteredModel",
    # errors
    "InputError", "UsageError", "CommandError", "CommandFailed", "Interrupted", "NoWinner",
    # progress events
    "TrialStarted", "EpochEnded", "TrialEnded", "Note",
]
