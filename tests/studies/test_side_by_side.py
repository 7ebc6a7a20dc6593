"""Training a grid's runs side by side: how many at a time, and real runs in processes of
their own (the same weights as one after another, their output echoed, failures named)."""

import pickle
import re
from pathlib import Path

import pytest
import torch
from rich.console import Console

from arelu_cli.studies import side_by_side
from arelu_cli.studies.core import Run, RunTrainer
from arelu_cli.train import run_dir
from arelu_cli.train.loop import train
from arelu_cli.util.errors import UserError


@pytest.mark.parametrize("jobs, runs, device, threads, cores, expected", [
    ("auto", 3, "cpu", "auto", 2, (3, 1)),      # every run at once, one thread each
    ("auto", 5, "cpu", "auto", 2, (4, 1)),      # at most two per core
    ("auto", 3, "cpu", "auto", 16, (3, 5)),     # the cores shared out
    ("auto", 1, "cpu", "auto", 2, (1, "auto")),  # one run keeps its threads
    ("auto", 3, "cuda", "auto", 16, (1, "auto")),  # a GPU trains one run at a time
    ("auto", 3, "cpu", 2, 2, (1, 2)),           # the user's 2 threads fill the 2 cores
    ("auto", 3, "cpu", 2, 8, (3, 2)),
    (1, 3, "cpu", "auto", 2, (1, "auto")),
    (2, 3, "cpu", "auto", 2, (2, 1)),
    (8, 3, "cpu", "auto", 16, (3, 5)),          # never more jobs than runs
])
def test_auto_trains_every_run_at_once_on_a_cpu_with_its_share_of_the_cores(
        jobs, runs, device, threads, cores, expected):
    assert side_by_side.plan(jobs, runs, device, threads, available=cores) == expected


def test_runs_against_the_clock_train_one_at_a_time_unless_asked():
    assert side_by_side.plan("auto", 3, "cpu", "auto", available=2, clock=True) == (1, "auto")
    assert side_by_side.plan(3, 3, "cpu", "auto", available=2, clock=True) == (3, 1)


@pytest.mark.parametrize("jobs", [0, -1, "many", 1.5, True])
def test_a_bad_jobs_setting_is_one_line_that_names_the_key(jobs):
    with pytest.raises(UserError, match=r"\[reproduce\] jobs must be \"auto\" or a number"):
        side_by_side.plan(jobs, 3, "cpu", "auto", available=2)


def test_the_trainer_travels_to_a_process_without_its_console():
    trainer = RunTrainer("toy", Console(), allow_data_change=True)
    copy = pickle.loads(pickle.dumps(trainer))
    assert (copy.recipe, copy.console, copy.allow_data_change) == ("toy", None, True)
    assert trainer.console is not None


def _runs(tiny_config, tiny_corpus, root: Path) -> list[tuple[str, Run, bool]]:
    return [(f"train {name}", Run(name, tiny_config(tiny_corpus, transform=name, tau="auto",
                                                    max_steps=4, threads=1), root / name),
             False) for name in ("softmax", "1.5-relu")]


def test_runs_side_by_side_train_the_same_weights_as_alone_and_record_it(
        tiny_config, tiny_corpus, tmp_path, one_thread):
    items = _runs(tiny_config, tiny_corpus, tmp_path / "side")
    out = Console(record=True, width=200)
    side_by_side.train(items, RunTrainer("tiny"), 2, out)
    echoed = out.export_text()
    for label, run, _ in items:
        alone = train(run.config, tmp_path / "alone" / run.name, recipe="tiny")
        side = torch.load(run.folder / "last.pt", weights_only=False)["model"]
        kept = torch.load(alone.out / "last.pt", weights_only=False)["model"]
        assert all(torch.equal(side[k], kept[k]) for k in kept)
        assert run_dir.read_summary(run.folder)["beside"] == 1
        assert run_dir.read_summary(alone.out)["beside"] == 0
        assert f"{label}: started" in echoed
        assert re.search(rf"^{re.escape(run.name)} │ step 3: validation loss", echoed, re.M)
        assert re.search(rf"^{re.escape(label)}: \d+ s$", echoed, re.M)


def test_a_run_that_fails_is_named_with_its_output_after_the_others_finish(
        tiny_config, tiny_corpus, tmp_path):
    good, bad = _runs(tiny_config, tiny_corpus, tmp_path)
    broken = Run(bad[1].name, tiny_config(tmp_path / "no-corpus", transform="1.5-relu",
                                          threads=1), bad[1].folder)
    with pytest.raises(UserError, match=r"side by side failed: train 1\.5-relu \(failed, exit "
                                        r"status 1; its output: (\S+)\)") as err:
        side_by_side.train([good, (bad[0], broken, False)], RunTrainer("tiny"), 2,
                           Console(file=open("/dev/null", "w")))
    log = Path(re.search(r"its output: (\S+)\)", str(err.value)).group(1))
    assert "no-corpus" in log.read_text()
    assert run_dir.finished(good[1].folder)
    log.unlink()


def test_a_stop_signal_stops_every_run_which_keeps_its_last_checkpoint(
        tiny_config, tiny_corpus, tmp_path):
    import os
    import signal
    import threading
    import time

    from arelu_cli.train.stop_signals import Interrupted

    items = [(label, Run(run.name, tiny_config(tiny_corpus, transform=run.config.train.transform,
                                               tau="auto", max_steps=100000, save_every=2,
                                               threads=1), run.folder), False)
             for label, run, _ in _runs(tiny_config, tiny_corpus, tmp_path)]

    def stop_once_both_train():
        deadline = time.monotonic() + 120
        while not all((run.folder / "last.pt").is_file() for _, run, _ in items):
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_once_both_train, daemon=True).start()
    with pytest.raises(Interrupted, match="stopped by SIGTERM while training side by side") as err:
        side_by_side.train(items, RunTrainer("tiny"), 2, Console(file=open("/dev/null", "w")))
    assert err.value.code == 128 + signal.SIGTERM
    assert "each run keeps its last.pt" in err.value.rerun("arelu reproduce toy")
    for _, run, _ in items:
        assert (run.folder / "last.pt").is_file() and not run_dir.finished(run.folder)
