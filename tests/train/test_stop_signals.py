"""Stop signals: the first asks to stop after the step, a second Ctrl-C aborts."""

import os
import signal
from pathlib import Path

import pytest

from arelu_cli.train.stop_signals import StopSignals


@pytest.fixture
def terminal_signals():
    """SIGINT and SIGTERM as in a terminal, even where the tests run with them ignored."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield signal.default_int_handler, signal.SIG_DFL
    signal.signal(signal.SIGINT, before[0])
    signal.signal(signal.SIGTERM, before[1])


def test_first_signal_asks_to_stop_and_a_second_ctrl_c_aborts(terminal_signals):
    before = terminal_signals
    with StopSignals(announce=False) as signals:
        assert signals.received is None
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received == signal.SIGTERM and signals.code == 143
        os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM changes nothing
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    with StopSignals(announce=False) as signals:
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.code == 130
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as under nohup: it stays ignored
    with StopSignals(announce=False) as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received is None
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    with StopSignals(announce=False) as signals:
        signals.received = signal.SIGINT
        stopped = signals.interrupted(5, Path("runs/x"), 5, rank=0)
    assert stopped.code == 130 and str(stopped) == (
        "stopped by SIGINT after step 5: runs/x/last.pt keeps step 5; resume with: "
        "arelu train --resume runs/x")
