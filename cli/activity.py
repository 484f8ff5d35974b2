"""A line for each silent phase of a command (loading torch, a model, an index): a spinner on a terminal,
the line once anywhere else, and on a terminal the time it took when it ends."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

FRAMES = "|/-\\"
TICK_S = 0.1


@contextmanager
def activity(message: str, *, enabled: bool = True) -> Iterator[None]:
    """Show ``message`` on stderr while the block runs (nothing when ``enabled`` is false)."""
    if not enabled:
        yield
        return
    stream = sys.stderr
    if not stream.isatty():
        print(f"{message} ...", file=stream, flush=True)
        yield
        return
    started, done = time.perf_counter(), threading.Event()

    def spin() -> None:
        for frame in itertools.cycle(FRAMES):
            stream.write(f"\r{frame} {message} ...")
            stream.flush()
            if done.wait(TICK_S):
                return

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()
        stream.write(f"\r{message}: {time.perf_counter() - started:.1f} s\n")
        stream.flush()
