"""A spinner for each silent phase of a command (loading torch, a model, an index) on a terminal, and the
time it took when it ends. Nothing where stderr is not a terminal: a log or a pipe gets no spinner frames
(and a reader of ``--json`` output mixed with stderr no extra line). ``show_run_log``: the INFO lines a
long command (``train``, ``study``) prints as it goes."""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

FRAMES = "|/-\\"
TICK_S = 0.1
# huggingface_hub's HTTP client (httpx; httpx2 from huggingface_hub 2): one INFO line per request of a weights
# download; faiss's loader: one INFO line per CPU instruction set it tries
QUIET_LOGGERS = ("httpx", "httpx2", "faiss.loader")


def show_run_log() -> None:
    """The project's INFO messages on stderr, one per line, without the HTTP client's per-request lines (a
    hub download shows its own progress bar) or faiss's loading attempts."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


@contextmanager
def activity(message: str, *, enabled: bool = True) -> Iterator[None]:
    """Spin ``message`` on stderr while the block runs, when stderr is a terminal and ``enabled``."""
    stream = sys.stderr
    if not enabled or not stream.isatty():
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
