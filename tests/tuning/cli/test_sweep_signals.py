"""SIGTERM stops `sweep` and `resume` as Ctrl-C does, notifying or not (tuning/cli/sweep_signals.py): the SIGINT
handler in place is called, even where SIGINT is blocked, as in a driver `ray job submit` started."""

from __future__ import annotations

import os
import signal

import pytest

from tuning.cli import sweep as sweep_cli
from tuning.cli.main import build_parser
from tuning.cli.sweep_signals import handle_sigterm_as_ctrl_c, sigterm_as_ctrl_c
from tuning.sweep_files import MANIFEST


@pytest.fixture()
def sigint_handler():
    """A SIGINT handler that records its calls, as Ray Tune's does while a sweep runs; restored after."""
    calls = []
    saved = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    yield calls
    signal.signal(signal.SIGINT, saved)


def test_sigterm_as_ctrl_c_calls_the_sigint_handler_in_place(sigint_handler):
    with sigterm_as_ctrl_c():
        os.kill(os.getpid(), signal.SIGTERM)
    assert sigint_handler == [signal.SIGINT]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # as it was, once out


def test_sigterm_as_ctrl_c_stops_a_driver_whose_sigint_is_blocked(sigint_handler):
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # what Ray's processes hand on to a job
    try:
        with sigterm_as_ctrl_c():
            os.kill(os.getpid(), signal.SIGTERM)
        assert sigint_handler == [signal.SIGINT]
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def test_handle_sigterm_as_ctrl_c_takes_sigterm_back_from_ray_init(sigint_handler):
    def ray_init_handler(signum, frame):  # what ray.init sets: sys.exit at once
        raise SystemExit(signum)

    with sigterm_as_ctrl_c():
        signal.signal(signal.SIGTERM, ray_init_handler)  # ray.init, inside the command
        handle_sigterm_as_ctrl_c()
        os.kill(os.getpid(), signal.SIGTERM)
    assert sigint_handler == [signal.SIGINT]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_sigterm_as_ctrl_c_is_keyboard_interrupt_under_python_own_handler():
    with pytest.raises(KeyboardInterrupt), sigterm_as_ctrl_c():
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 1)  # the handler runs between bytecodes; give it the moment


@pytest.mark.parametrize(("argv", "first"), [(["sweep", "--data", "b.parquet", "--space", "s.yaml"], "read_yaml"),
                                            (["resume", "t"], "read_manifest")], ids=["sweep", "resume"])
def test_sweep_and_resume_handle_sigterm_without_notify(argv, first, monkeypatch, tmp_path):
    seen = []
    if argv[0] == "resume":  # a sweep folder with its manifest, so that resume gets as far as reading it
        (tmp_path / "t").mkdir()
        (tmp_path / "t" / MANIFEST).write_text("{}")
        argv = [*argv, "--storage", str(tmp_path)]

    def stop(*args, **kwargs):  # the command's first step: what handles SIGTERM while it runs
        seen.append(signal.getsignal(signal.SIGTERM))
        raise RuntimeError("stop here")

    monkeypatch.setattr(sweep_cli, first, stop)
    args = build_parser().parse_args(argv)
    assert args.notify is None
    with pytest.raises(RuntimeError, match="stop here"):
        args.run(args)
    assert seen and seen[0] not in (signal.SIG_DFL, signal.SIG_IGN, None)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
