"""Warm starts: a new sweep that begins with what another sweep learned (`sweep --warm-start OTHER`).

On the same bars (the bars file's SHA-256 in both manifests) with the same validation loss (target, horizon,
split and objective), the other sweep's completed and pruned Optuna trials are added to the new study, with
their intermediate values (each epoch's best val_loss so far), so that the sampler sees them as trials of its own;
and the stopping rule (tuning/search/schedulers/, which reads the ledger, never the study) gets them too: `warm_curves`
gives each added trial's curve from its intermediate values, and tuning/sweep/trial_files.py's SweepCurves hands them
to the rule with the ledger's, under ids no Ray trial has (WARM_ID), so they are in its rungs (medians) but never in
the new sweep's ledger, leaderboard, finalists or winner; unless their epochs ran under another schedule (another
scheduler.max_epochs: each epoch's learning rate differs), said in a line. Its confirmed winner is enqueued as the
first point, before the space's own initial ones.
On other bars (or another loss) its trials measure something else: only its winner's configuration is
enqueued, and the sweep says so in one line.

A trial is a point of the whole configuration: each setting the new space searches takes the other trial's
value, searched there or fixed there (the other space's fixed value). A setting the other searched and the new
space does not is dropped (named once); a trial whose value lies outside the new range is not added (counted).
A winner's value outside the new range is left out of its point (the sampler picks it) and said.

Refused before anything is written (UsageError): a sweep that does not exist, one whose space searches no setting
the new one searches (disjoint: none of its trials says anything here), one with neither a trial nor a winner, one
whose study cannot be read (read_source reads it whole: `plan` reads nothing more, so it cannot fail on reading).
Adding is idempotent: a study that already holds the other's trials (a resumed sweep's) is left as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuning.errors import UsageError
from tuning.search.curves import RecordedCurve
from tuning.search.finalists import winner_or_none
from tuning.search.ledger import Ledger, TrialRecord
from tuning.search.searchable import setting_name, value_of_setting
from tuning.search.space import SweepSpace, parse_space, with_params
from tuning.sweep_files import LEDGER, MANIFEST, STUDY, SweepPaths, is_uri, sweep_paths
from tuning.yaml_io import ConfigError

FROM, TRIAL, WINNER = "warm_start_from", "warm_start_trial", "warm_start_winner"  # the new study's user attributes
WARM_ID = "warm-start:{source}:{number}"  # an added trial's id for the stopping rule (Ray's ids have no colon)
SAME_LOSS = ("target", "horizon", "split_bar", "objective")  # data_identity keys: what the validation loss measures


@dataclass(frozen=True)
class WarmSource:
    """The sweep a warm start reads: its manifest, space, ledger and study."""

    name: str
    storage: str
    manifest: Any  # tuning/sweep/manifest.py's SweepManifest
    space: SweepSpace
    records: tuple[TrialRecord, ...]
    study_url: str | None  # None: its SQLite study is not on this machine
    study_trials: tuple[Any, ...] = ()  # its study's completed and pruned optuna FrozenTrials, read by read_source


@dataclass(frozen=True)
class WarmStart:
    """What a warm start adds to the new study: prior trials (same bars) and the winner's point."""

    source: str
    storage: str
    trials: tuple[Any, ...]  # optuna FrozenTrials in the new space's distributions
    winner_point: dict[str, Any] | None  # the other's winner restricted to the new space, by the new space's keys
    winner_id: str | None
    other_loss: str | None  # why its trials are not added (other bars, another horizon, ...); None: they are
    dropped: tuple[str, ...] = ()  # settings the other searched that the new space does not
    outside: int = 0  # trials not added: a value outside the new space
    notes: tuple[str, ...] = field(default=())  # one line each: the winner's values left out, no study here, ...
    in_rule: bool = True  # the stopping rule compares them too (their epochs ran under this sweep's schedule)

    def lines(self) -> list[str]:
        """What the sweep prints: one line, and one per note."""
        head = f"warm start from sweep {self.source}"
        first = f"its winner (trial {self.winner_id}) is the first trial" if self.winner_point is not None \
            else "it has no confirmed winner to try first (no trial completed, or its confirmation is not done)"
        if self.other_loss is not None:
            said = [f"{head}: {self.other_loss}, so only its winner's configuration is enqueued, none of its trials; "
                    f"{first}" if self.winner_point is not None else
                    f"{head}: {self.other_loss}, and it has no confirmed winner: nothing is taken from it"]
        else:
            outside = f" ({self.outside} left out: a value outside this space)" if self.outside else ""
            said = [f"{head}: {len(self.trials)} of its trials added to the study{outside}; {first}"]
        taken = " and ".join(what for what, there in (("its trials", self.trials),
                                                      ("its winner", self.winner_point is not None)) if there)
        if self.dropped and taken:
            said.append(f"warm start: {', '.join(self.dropped)} searched by {self.source} and not here: dropped "
                        f"from {taken}")
        return said + [f"warm start: {note}" for note in self.notes]

    def to_dict(self) -> dict[str, Any]:
        """What the manifest keeps of it."""
        return {"sweep": self.source, "storage": self.storage, "trials_added": len(self.trials),
                "winner": self.winner_id, **({"other_loss": self.other_loss} if self.other_loss else {}),
                **({} if self.in_rule else {"stopping_rule": False})}


def read_source(name: str, storage: str) -> WarmSource:
    """The sweep `name` in `storage` (a folder or a URI); UsageError when there is none. Nothing is written (a URI
    storage's records are fetched as `best` fetches them)."""
    from tuning.sweep.manifest import read_manifest

    try:
        paths = sweep_paths(storage, name)
        if not is_uri(storage) and not (paths.folder / MANIFEST).is_file():
            raise UsageError(f"no sweep named {name!r} in {paths.folder.parent}; `mamba-tune list --storage "
                             f"{paths.folder.parent}` lists them (give the other's with --warm-start-storage)")
        manifest = read_manifest(paths)
    except UsageError as exc:
        raise UsageError(f"--warm-start {name}: {exc}") from None
    paths = SweepPaths(name, paths.folder, manifest.ray_storage, manifest.study_url)
    space = parse_space(manifest.space, str(paths.folder / MANIFEST), stored=True)
    records = tuple(Ledger(paths.folder / LEDGER).records.values())
    here = manifest.study_url is not None or (paths.folder / STUDY).is_file()
    url = paths.study_url if here else None
    return WarmSource(name, storage, manifest, space, records, url, _study_trials(name, url))


def _study_trials(name: str, study_url: str | None) -> tuple[Any, ...]:
    """The completed and pruned trials of the study `name` at `study_url` (none without one); UsageError when it
    cannot be read (the new sweep then writes nothing)."""
    if study_url is None:
        return ()
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=name, storage=study_url)
        return tuple(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    except Exception as exc:  # noqa: BLE001 - a missing study, a corrupt or unreachable database: said in one line
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UsageError(f"--warm-start {name}: its Optuna study ({study_url}) cannot be read ({why}); repair or "
                         "restore it, or leave --warm-start out") from None


def require_overlap(source: WarmSource, space: SweepSpace) -> None:
    """UsageError unless the other sweep searched a setting the new space searches, and has something to give."""
    theirs, ours = _names(source.space), _names(space)
    if not set(theirs) & set(ours):
        raise UsageError(f"--warm-start {source.name}: it searched {', '.join(theirs)} and this space searches "
                         f"{', '.join(ours)}: no setting in common, so none of its trials says anything here; "
                         "warm-start from a sweep that searched one of these, or leave --warm-start out")
    if not any(r.stage == "search" for r in source.records) and source.study_url is None:
        raise UsageError(f"--warm-start {source.name}: it has no finished trial to start from; let it run "
                         f"(`mamba-tune resume {source.name}`), or leave --warm-start out")


def plan(source: WarmSource, space: SweepSpace, bars_sha256: str | None, identity: dict[str, Any]) -> WarmStart:
    """The warm start of a new sweep over `space` on bars with `bars_sha256` and data identity `identity`
    (model/training.py's data_identity: its objective among them)."""
    distributions = _distributions(space)
    notes: list[str] = []
    best, point = _winner(source), None
    if best is not None:
        point, left_out = _point(source.space, best.params, space, distributions)
        if left_out:
            one = len(left_out) == 1
            notes.append(f"its winner's {', '.join(left_out)} {'lies' if one else 'lie'} outside this space: the "
                         f"sampler picks {'it' if one else 'them'}")
    other_loss = _other_loss(source, bars_sha256, identity)
    trials: list[Any] = []
    outside = 0
    if other_loss is None:
        if source.study_url is None:
            notes.append(f"sweep {source.name}'s Optuna study is not on this machine: none of its trials is added")
        else:
            trials, outside = _trials(source, space, distributions)
    theirs, ours = source.space.scheduler.max_epochs, space.scheduler.max_epochs
    if trials and theirs != ours:
        notes.append(f"its trials ran a {theirs}-epoch schedule (warmup and cosine), this sweep's is {ours}: the "
                     "sampler sees them, the stopping rule compares this sweep's own trials only")
    dropped = tuple(sorted(set(_names(source.space)) - set(_names(space))))
    return WarmStart(source.name, source.storage, tuple(trials), point, best.trial_id if best else None, other_loss,
                     dropped, outside, tuple(notes), in_rule=theirs == ours)


def apply(warm: WarmStart, study_url: str, study_name: str) -> int:
    """Add the warm start's trials to the study `study_name` at `study_url` (created if new) and enqueue its winner;
    returns the trials added (0 when the study holds them already: a resumed sweep's)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=study_name, storage=study_url, direction="minimize", load_if_exists=True)
    if any(t.user_attrs.get(FROM) == warm.source for t in study.get_trials(deepcopy=False)):
        return 0
    study.add_trials(list(warm.trials))
    if warm.winner_point is not None:
        study.enqueue_trial(dict(warm.winner_point), user_attrs={FROM: warm.source, WINNER: warm.winner_id})
    elif not warm.trials:
        study.set_user_attr(FROM, warm.source)  # nothing to add: the study says where it was warm-started from
    return len(warm.trials)


def _names(space: SweepSpace) -> list[str]:
    """The settings a space searches, by their one dotted name (learning_rate and train.lr are one)."""
    return [setting_name(key) for key in space.search]


def _distributions(space: SweepSpace) -> dict[str, Any]:
    from tuning.search.searcher import optuna_space

    return optuna_space(space)


def _winner(source: WarmSource) -> TrialRecord | None:
    return winner_or_none(list(source.records), source.space.confirm, source.space.run.train.seed)


def _setting_values(other: SweepSpace, params: dict[str, Any], names: list[str]) -> dict[str, Any] | None:
    """Each setting's value in the other sweep's trial: searched there (its params) or fixed there (its space);
    None when the other's recipe refuses the combination."""
    try:
        run = with_params(other.run, params)
    except (ConfigError, ValueError):
        return None
    values = {}
    for name in names:
        section, _, key = name.partition(".")
        values[name] = value_of_setting(params, name, getattr(getattr(run, section), key))
    return values


def _inside(value: Any, distribution: Any) -> bool:
    try:
        internal = distribution.to_internal_repr(value)
    except (ValueError, TypeError):
        return False
    if isinstance(internal, float) and not math.isfinite(internal):
        return False
    return bool(distribution._contains(internal))


def _point(other: SweepSpace, params: dict[str, Any], space: SweepSpace,
           distributions: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the other's trial as a point of `space`, by its keys; the settings whose value lies outside it)."""
    keys = {setting_name(key): key for key in space.search}
    values = _setting_values(other, params, list(keys)) or {}
    point = {keys[name]: value for name, value in values.items() if _inside(value, distributions[keys[name]])}
    return point, [name for name in keys if keys[name] not in point]


def _other_loss(source: WarmSource, bars_sha256: str | None, identity: dict[str, Any]) -> str | None:
    """Why the other sweep's losses are not this sweep's (other bars, another horizon, ...); None when they are."""
    theirs = source.manifest.bars_sha256
    if theirs is None or bars_sha256 is None or theirs != bars_sha256:
        known = f"SHA-256 {theirs[:12]}" if theirs else "bars of unknown SHA-256"
        return f"it ran on other bars ({known}, these {bars_sha256[:12] if bars_sha256 else 'unknown'})"
    other_identity = {**source.manifest.data_identity}
    other_identity.setdefault("objective", _objective(source.space))
    for key in SAME_LOSS:
        if key in other_identity and key in identity and other_identity[key] != identity[key] \
                and None not in (other_identity[key], identity[key]):
            return f"it measured another validation loss ({key} {other_identity[key]}, here {identity[key]})"
    return None


def _objective(space: SweepSpace) -> str | None:
    """The loss the space's data settings resolve to (None from a version without objectives)."""
    return getattr(space.run.data, "loss", None)


def _trials(source: WarmSource, space: SweepSpace, distributions: dict[str, Any]) -> tuple[list[Any], int]:
    """(the other's completed and pruned trials as trials of `space`, how many were left out of range)."""
    import optuna
    from optuna.trial import TrialState

    keys = {setting_name(key): key for key in space.search}
    added, outside = [], 0
    for frozen in source.study_trials:
        if frozen.user_attrs.get("stop_reason") == "invalid" or TRIAL in frozen.user_attrs:
            continue  # a combination its recipe refused, never trained; or a trial it took from a warm start of its own
        values = _setting_values(source.space, frozen.params, list(keys))
        if values is None:
            continue
        params = {keys[name]: value for name, value in values.items()}
        if not all(_inside(value, distributions[key]) for key, value in params.items()):
            outside += 1
            continue
        value = frozen.value if frozen.value is not None and math.isfinite(frozen.value) else None
        if frozen.state == TrialState.COMPLETE and value is None:
            continue
        attrs = {k: frozen.user_attrs[k] for k in ("stop_reason", "stop_epoch") if k in frozen.user_attrs}
        added.append(optuna.trial.create_trial(
            params=params, distributions={key: distributions[key] for key in params}, value=value,
            intermediate_values={step: v for step, v in frozen.intermediate_values.items() if math.isfinite(v)},
            user_attrs={**attrs, FROM: source.name, TRIAL: frozen.user_attrs.get("ray_trial_id", frozen.number)},
            state=frozen.state))
    return added, outside


def warm_curves(folder: Path) -> dict[str, RecordedCurve]:
    """The trials a warm start added to the study of the sweep in `folder`, as the stopping rule takes them: WARM_ID
    -> its curve (intermediate values by epoch, a step it has none at NaN; up to its stop_epoch). {} unless its
    manifest says trials were added (same bars) that ran under this sweep's schedule (the same max_epochs, which
    sets each epoch's learning rate): the study is then not opened."""
    import json

    from tuning.sweep.manifest import SweepManifest

    try:  # the file here as it is (read_manifest would fetch a URI storage's copy, and refuse a missing one)
        manifest = SweepManifest.from_dict(json.loads((folder / MANIFEST).read_text()))
    except (FileNotFoundError, ValueError):
        return {}
    warm = manifest.warm_start or {}
    if not warm.get("trials_added") or warm.get("stopping_rule") is False:
        return {}
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    paths = SweepPaths(manifest.name, folder, manifest.ray_storage, study=manifest.study_url)
    study = optuna.load_study(study_name=manifest.name, storage=paths.study_url)
    curves = {}
    for frozen in study.get_trials(deepcopy=False):
        if TRIAL not in frozen.user_attrs or not frozen.intermediate_values:
            continue
        steps = frozen.intermediate_values
        last = int(frozen.user_attrs.get("stop_epoch", max(steps)))
        key = WARM_ID.format(source=frozen.user_attrs.get(FROM), number=frozen.number)
        curves[key] = RecordedCurve(tuple(steps.get(epoch, math.nan) for epoch in range(max(steps) + 1)), last)
    return curves


def warm_start_storage(given: str | None, storage: str) -> str:
    """The storage the other sweep is in: --warm-start-storage, else the new sweep's --storage."""
    return given if given is not None else storage

