"""Live progress of a training run: a tqdm bar on a terminal, a plain line every few seconds otherwise."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

PLAIN_EVERY_S = 5.0


class Progress:
    """Shows steps, steps/s, episodes, last and best eval and elapsed time.

    Args:
        total_steps: the step budget, if any (gives the bar an end and an ETA).
        enabled: False shows nothing (tests, --quiet).
        stream: where to write; a terminal gets a live bar, anything else plain lines.
    """

    def __init__(self, total_steps: int | None, enabled: bool = True, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.live = enabled and self.stream.isatty()
        self.bar = tqdm(
            total=total_steps,
            unit=" steps",
            unit_scale=True,
            dynamic_ncols=True,
            file=self.stream,
            disable=not self.live,
            mininterval=0.5,
        )
        self.start = time.monotonic()
        self.last_plain = self.start

    def update(self, steps: int, episodes: int, last_eval: float | None, best_eval: float | None) -> None:
        """Show the current totals (cheap to call often: the bar throttles itself)."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        evals = "eval -" if last_eval is None else f"eval {last_eval:.1f} (best {best_eval:.1f})"
        if self.live:
            self.bar.update(steps - self.bar.n)
            self.bar.set_postfix_str(f"episodes {episodes} | {evals}", refresh=False)
        elif time.monotonic() - self.last_plain >= PLAIN_EVERY_S:
            self.last_plain = time.monotonic()
            rate = steps / elapsed if elapsed > 0 else 0.0
            print(
                f"[{elapsed:7.1f}s] steps {steps:,} | {rate:,.0f} steps/s | episodes {episodes} | {evals}",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        self.bar.close()
