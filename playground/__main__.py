"""Command line: ``python -m playground step --seed 0 --n 32 ...`` prints the summary as JSON;
``python -m playground inspect PATH [--json OUT] [--html OUT]`` shows every tensor of a
checkpoint through every recipe (``core.tensors.inspection``).

Every ``step`` flag is generated from StepConfig's table of settings (``--d-in`` for ``d_in``,
and ``--seed`` as a short name for ``--model-seed``), so the CLI cannot drift from the UI.
Bad input (a setting out of range, a path that is no checkpoint) is one line on stderr and
exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from playground.core.settings.settings import ConfigError, StepConfig, defaults, settings
from playground.core.step.report import run_report
from playground.core.tensors import inspection
from playground.core.tensors.checkpoint import CheckpointError
from playground.core.tensors.recipe_stats import QUANTIZED
from playground.sections.step.summary import summarize
from playground.views.checkpoint_html import checkpoint_html


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
    _add_inspect(commands)
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {value}")
    return value


def _add_inspect(commands) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="every tensor of a safetensors checkpoint through every recipe, as JSON",
        description=inspection.__doc__.split("Example::")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect.add_argument(
        "path", help="a .safetensors file, a folder of shards or a model folder, or ORG/NAME"
    )
    inspect.add_argument("--json", metavar="OUT", help="write the JSON here (default: stdout)")
    inspect.add_argument("--html", metavar="OUT", help="write a self-contained HTML report")
    inspect.add_argument(
        "--sample", type=_positive, metavar="N", help="at most N values per tensor"
    )
    inspect.add_argument(
        "--underflow",
        type=float,
        default=inspection.UNDERFLOW_THRESHOLD,
        help="keep a tensor in high precision past this underflow share (default %(default)s)",
    )
    inspect.add_argument(
        "--mse",
        type=float,
        default=inspection.MSE_THRESHOLD,
        help="keep a tensor in high precision past this mse (default %(default)s)",
    )
    inspect.add_argument(
        "--rule-recipes",
        default=",".join(QUANTIZED),
        help="comma-separated recipes the keep-high-precision rule reads (default: all of "
        "%(default)s: listed when any of them crosses a threshold)",
    )


def _progress(done: int, total: int, values: int, seconds: float) -> None:
    speed = values / seconds / 1e6 if seconds > 0 else 0.0
    end = "\n" if done == total else ""
    print(
        f"\rinspect: {done}/{total} tensors, {values:,} values, {speed:.1f} M values/s",
        end=end,
        file=sys.stderr,
        flush=True,
    )


def run_inspect(args: argparse.Namespace) -> int:
    rule = tuple(name.strip() for name in args.rule_recipes.split(",") if name.strip())
    unknown = sorted(set(rule) - set(QUANTIZED))
    if unknown:
        print(f"error: --rule-recipes: unknown {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        record = inspection.inspect_checkpoint(
            args.path, args.sample, args.underflow, args.mse, rule, progress=_progress
        )
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = json.dumps(record, indent=1, allow_nan=False)
    if args.json:
        Path(args.json).write_text(text + "\n")
    else:
        print(text)
    if args.html:
        kept = inspection.kept_by_recipe(record, args.underflow, args.mse, rule)
        Path(args.html).write_text(checkpoint_html(record, f"inspect {args.path}", kept))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "inspect":
        return run_inspect(args)
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
