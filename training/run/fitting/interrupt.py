"""Ctrl-C that stops training at a safe point instead of wherever the signal happens to land.

Python raises ``KeyboardInterrupt`` wherever the main thread is when SIGINT arrives; inside a
weakref callback or ``__del__`` it is printed and swallowed, and training silently goes on. The
first Ctrl-C therefore only records the request, and the trainer raises ``KeyboardInterrupt``
after the current step (``check``); a second Ctrl-C interrupts at once, as usual.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class InterruptRequest:
    def __init__(self) -> None:
        self.requested = False

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if Ctrl-C was pressed since the last check."""
        if self.requested:
            raise KeyboardInterrupt

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:  # the second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.requested = True


@contextmanager
def interrupt_at_safe_points() -> Iterator[InterruptRequest]:
    """Install the SIGINT handler for the block (main thread only); restore the previous one after."""
    request = InterruptRequest()
    try:
        previous = signal.signal(signal.SIGINT, request._on_sigint)
    except ValueError:  # not the main thread: keep Python's default behaviour
        yield request
        return
    try:
        yield request
    finally:
        signal.signal(signal.SIGINT, previous)
