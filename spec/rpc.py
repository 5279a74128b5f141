"""A step made of an RPC's halves: the request, its handling on the other side, and the
handling of the response, as three pure functions. The step is their composition, here
and nowhere else; the fast path may cache each half apart, because far fewer distinct
halves occur than whole exchanges, but it calls these same functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkamc.spec.state import State


@dataclass(frozen=True)
class RoundTrip:
    send: Callable[..., Any]  # (cfg, state, action) -> the request, or None when not sent
    handle: Callable[..., Any]  # (cfg, state, action, request) -> (state, response), or None when refused
    receive: Callable[..., Any]  # (cfg, state, action, response) -> state

    def __call__(self, cfg, state: State, action) -> State | None:
        request = self.send(cfg, state, action)
        if request is None:
            return None
        handled = self.handle(cfg, state, action, request)
        if handled is None:
            return None  # refused: nothing changes on either side
        state, response = handled
        return self.receive(cfg, state, action, response)
