"""Command line: ``python -m playground step --seed 0 --n 32 ...`` prints the summary as JSON.

Every flag is generated from StepConfig's table of settings (``--d-in`` for ``d_in``, and
``--seed`` as a short name for ``--model-seed``), so the CLI cannot drift from the UI.
"""

from __future__ import annotations

import argparse
import json
import sys

from playground.core.settings.settings import ConfigError, StepConfig, defaults, settings
from playground.core.step.report import run_report
from playground.sections.step.summary import summarize


def _number(text: str) -> int | float:
    """A number as typed: int when it parses as one, else float; StepConfig checks the range."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    step = commands.add_parser("step", help="run one step and print its summary as JSON")
    initial = defaults()
    for name, bounds in settings().items():
        if bounds.group == "dynamics":  # a training run's settings; this command runs one step
            continue
        flags = [f"--{name.replace('_', '-')}"] + (["--seed"] if name == "model_seed" else [])
        step.add_argument(
            *flags,
            dest=name,
            default=initial[name],
            type=str if bounds.choices else _number,
            choices=bounds.choices or None,
            help=f"{bounds.help} {bounds.describe()}; default {initial[name]}",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    values = {name: getattr(args, name) for name in settings() if hasattr(args, name)}
    try:
        config = StepConfig(**values)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(summarize(run_report(config)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
