"""``a3c runs`` and ``a3c plot``: the runs under a folder as a table, and their curves as one figure (extra
``analysis``, loaded when a command runs). A run whose files are damaged is listed (and drawn) with what
could be read of it, a ``warning:`` line says what is wrong, and the command exits 1, as ``ls`` does when it
could not read everything."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

from a3c.core.errors import BadInput
from a3c.core.extras import install_hint


def _analysis(plotting: bool = False):
    """a3c.tools.analysis, or BadInput naming the extra to install; with ``plotting``, matplotlib must be
    there too (plot.py imports it only when it draws)."""
    try:
        import a3c.tools.analysis as analysis

        if plotting:
            import matplotlib  # noqa: F401
    except ImportError as exc:
        missing = exc.name or ("matplotlib" if plotting else "pandas")  # None when a package is broken
        raise BadInput(f"{missing} is not installed; {install_hint('analysis')}") from None
    return analysis


def parse_levels(text: str | None) -> list[float]:
    """``16,17`` → [16.0, 17.0]; None → []; anything else is BadInput naming ``--reach``."""
    if text is None:
        return []
    try:
        levels = [float(part) for part in text.split(",")]
    except ValueError:
        levels = []
    if not levels or not all(math.isfinite(level) for level in levels):
        raise BadInput(
            f"--reach: {text!r} is not allowed; expected finite returns joined by commas, e.g. 16,17"
        )
    return levels


@click.command()
@click.argument("directory", type=click.Path(path_type=Path), default=Path("runs"), required=False)
@click.option(
    "--reach",
    default=None,
    metavar="LEVELS",
    help="Add the steps and seconds at which each run's last --window training games first averaged each "
    "of these returns, e.g. 16,17.  [default: none: no such columns]",
)
@click.option("--window", default=100, show_default=True, type=int, help="Training games for --reach, >= 1.")
def runs(directory: Path, reach: str | None, window: int) -> None:
    """The runs under DIRECTORY (default runs/): env, seed, start, steps, wall, best eval, solved (with
    --reach, when each run's training games first averaged each level); then, for each group of runs that
    differ only by seed, the IQM of their final and best eval return and time to solve, with stratified
    bootstrap 95% intervals (docs/analysis.md). A damaged run: a problem column and a warning line; exit 1."""
    levels = parse_levels(reach)
    if window < 1:
        raise BadInput(f"--window: {window} is not allowed; expected an integer >= 1")
    analysis = _analysis()
    try:
        loaded = analysis.load_runs(directory)
    except FileNotFoundError:
        raise BadInput(
            f"DIRECTORY: no run directories (with a config.json) under {str(directory)!r}"
        ) from None
    click.echo(analysis.runs_table(loaded, levels, window).to_string(index=False))
    groups = analysis.seed_groups(loaded)
    if len(groups):
        click.echo("\nseed groups: IQM over runs [stratified bootstrap 95% CI]")
        click.echo(analysis.format_seed_groups(groups))
    _warn_damaged(loaded)


def _warn_damaged(loaded) -> None:
    """A ``warning:`` line (stderr) for each run whose files could not be read whole, then exit 1; nothing
    when every run was."""
    damaged = loaded.runs.dropna(subset=["problem"])
    for run, problem in zip(damaged["run"], damaged["problem"], strict=True):
        click.echo(f"warning: {run}: {problem}", err=True)
    if len(damaged):
        sys.exit(1)


@click.command()
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN_OR_DIR...")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Image to write (.png, .pdf, .svg).",
)
@click.option(
    "--x", "x_axis", type=click.Choice(["steps", "time"]), default="steps", help="The x axis of the curves."
)
@click.option(
    "--group-by",
    default=None,
    metavar="KEY",
    help="One eval curve per value of this config key, e.g. lr.  [default: none: one per env and config]",
)
def plot(sources: tuple[Path, ...], output: Path, x_axis: str, group_by: str | None) -> None:
    """Learning curves (eval IQM with a stratified bootstrap 95% CI band across seeds, smoothed training
    returns), throughput and policy lag of one or more runs, as one figure."""
    analysis = _analysis(plotting=True)
    if output.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise BadInput(f"--output: {str(output)!r} is not allowed; expected a .png, .pdf or .svg file")
    if not output.parent.is_dir():
        raise BadInput(f"--output: the folder {str(output.parent)!r} does not exist")
    try:
        loaded = analysis.load_runs(list(sources))
    except FileNotFoundError:
        raise BadInput(
            f"RUN_OR_DIR: no run directories (with a config.json) in {[str(s) for s in sources]}"
        ) from None
    from a3c.tools.plot import plot_runs  # its imports are the analysis extra's, checked above

    path = plot_runs(loaded, output, x=x_axis, group_by=group_by)
    click.echo(f"wrote {path} ({len(loaded.paths)} runs)")
    _warn_damaged(loaded)
