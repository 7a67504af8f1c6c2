"""Live progress of a training run: a tqdm bar on a terminal or in a Jupyter notebook, a plain line every few
seconds otherwise (a log file, a pipe)."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

PLAIN_EVERY_S = 5.0
# A notebook's cell has no terminal width to follow: a fixed one that fits its output area.
NOTEBOOK_COLUMNS = 100


def in_jupyter_kernel() -> bool:
    """Whether this process is a Jupyter kernel (IPython's ``ZMQInteractiveShell``), whose cell output
    rewrites the line at a carriage return as a terminal does. IPython is only looked up, never imported."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def can_show_live(stream=None) -> bool:
    """Whether ``stream`` (stdout by default: where the progress goes) shows a live line: a terminal, or a
    Jupyter notebook's output. ``a3c.train(progress=None)`` shows progress exactly then."""
    stream = stream or sys.stdout
    isatty = getattr(stream, "isatty", None)
    return bool(callable(isatty) and isatty()) or in_jupyter_kernel()


def eta_seconds(
    steps: int, rate: float, elapsed: float, max_steps: int | None, max_seconds: float | None
) -> float | None:
    """Seconds left until the first budget runs out (None without a budget or before a rate is known)."""
    etas = []
    if max_steps is not None and rate > 0:
        etas.append(max(0.0, (max_steps - steps) / rate))
    if max_seconds is not None:
        etas.append(max(0.0, max_seconds - elapsed))
    return min(etas) if etas else None


class Progress:
    """Shows steps, steps/s, episodes, last and best eval, mean policy lag, elapsed time and the ETA.

    Args:
        total_steps: the step budget, if any (gives the bar an end).
        enabled: False shows nothing (--quiet).
        stream: where to write (stdout by default); a terminal or a notebook gets a live bar, anything else
            plain lines.
    """

    def __init__(self, total_steps: int | None, enabled: bool = True, stream=None):
        self.stream = stream or sys.stdout
        self.enabled = enabled
        self.total_steps = total_steps
        self.live = enabled and can_show_live(self.stream)
        notebook = self.live and not self.stream.isatty()
        self.bar = tqdm(
            total=total_steps,
            unit=" steps",
            unit_scale=True,
            dynamic_ncols=not notebook,
            ncols=NOTEBOOK_COLUMNS if notebook else None,
            file=self.stream,
            disable=not self.live,
            mininterval=0.5,
        )
        self.last_plain = time.monotonic()

    def update(
        self,
        steps: int,
        episodes: int,
        last_eval: float | None,
        best_eval: float | None,
        policy_lag: float | None = None,
        elapsed: float = 0.0,
        max_seconds: float | None = None,
    ) -> None:
        """Show the current totals (cheap to call often: the bar and the plain lines throttle themselves)."""
        if not self.enabled:
            return
        rate = steps / elapsed if elapsed > 0 else 0.0
        parts = [f"episodes {episodes}"]
        parts.append("eval -" if last_eval is None else f"eval {last_eval:.1f} (best {best_eval:.1f})")
        if policy_lag is not None:
            parts.append(f"lag {policy_lag:.1f}")
        eta = eta_seconds(steps, rate, elapsed, self.total_steps, max_seconds)
        if eta is not None:
            parts.append(f"ETA {eta:.0f}s")
        if self.live:
            self.bar.update(steps - self.bar.n)
            self.bar.set_postfix_str(" | ".join(parts), refresh=False)
        elif time.monotonic() - self.last_plain >= PLAIN_EVERY_S:
            self.last_plain = time.monotonic()
            print(
                f"[{elapsed:7.1f}s] steps {steps:,} | {rate:,.0f} steps/s | " + " | ".join(parts),
                file=self.stream,
                flush=True,
            )

    def warn(self, line: str) -> None:
        """Show one warning line above the bar (or between the plain lines); nothing when disabled."""
        if not self.enabled:
            return
        if self.live:
            self.bar.write(line, file=self.stream)
        else:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        """Close the bar (a disabled one, when not live, shows nothing)."""
        self.bar.close()
