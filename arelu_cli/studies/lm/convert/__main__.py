"""``python -m arelu_cli.studies.lm.convert RECIPE --out DIR [--set SECTION.KEY=VALUE ...]``:
run or continue the conversion study (:mod:`arelu_cli.studies.lm.convert.stages`), logging
progress to stdout and ``DIR/driver.log``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from arelu_cli.studies.lm.convert.recipe import load_recipe
from arelu_cli.studies.lm.convert.stages import run_study
from arelu_cli.util.errors import UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arelu_cli.studies.lm.convert")
    parser.add_argument("recipe")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "driver.log"

    def say(line: str) -> None:
        stamped = f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}"
        print(stamped, flush=True)
        with log.open("a", encoding="utf-8") as f:
            f.write(stamped + "\n")

    try:
        recipe = load_recipe(args.recipe, args.overrides)
        say(f"start: {args.recipe} {' '.join(args.overrides)} threads {torch.get_num_threads()}")
        run_study(recipe, out, say)
    except UserError as err:
        say(f"error: {err}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
