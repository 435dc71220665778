"""Build one harvested class and find an input its forward runs on, within a time limit.

Each class gets a few constructor assignments (rules.constructor_candidates) and, for each built
model, a few input lists (rules.input_candidates); the first pair whose forward returns a tensor,
in well under a second, is the case. The model is built by evaluating the very expression the
case file records, in the namespace of the module that defines the class, which is how
`ptranspile verify --entry` builds it. Downloads are refused (a constructor that fetches weights
is "downloads", not a case: the corpus must run offline), and every step is bounded by a signal
alarm (a class whose C code ignores it is caught by the worker's parent, see harvest.py).
"""

from __future__ import annotations

import inspect
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from benchmarks.harvest.rules import (
    MAX_INPUT_CANDIDATES,
    constructor_candidates,
    first_layer,
    input_candidates,
    is_rule_layer,
    is_trivial,
    make_inputs,
    tensors_in,
)
from benchmarks.harvest.rules import unguessable as unguessable_params

BUILD_LIMIT_S = 3.0  # one constructor call
FORWARD_LIMIT_S = 2.0  # one forward
CLASS_BUDGET_S = 8.0  # all tries of one class together
RUNNABLE_S = 1.0  # a case builds and runs one forward in less than this

#: the not-buildable reasons, from the earliest stage to the latest (the furthest reached is reported)
REASONS = (
    "abstract",
    "args not guessable",
    "not reachable by name",
    "build failed",
    "downloads",
    "forward failed",
    "no tensor output",
    "too slow",
)


class Timeout(BaseException):
    """A step ran past its limit (a BaseException: library code catching Exception must not eat it)."""


class DownloadBlocked(BaseException):
    """A constructor or forward tried to reach the network."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def on_alarm(signum: int, frame: Any) -> None:
        raise Timeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def block_downloads() -> None:
    """Make every network access raise DownloadBlocked (sockets, urllib, torch.hub)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise DownloadBlocked("network access while building or running a harvested class")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]
    urllib.request.urlopen = refuse  # type: ignore[assignment]
    torch.hub.download_url_to_file = refuse  # type: ignore[assignment]
    torch.hub.load_state_dict_from_url = refuse  # type: ignore[assignment]


def _short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_download(exc: BaseException) -> bool:
    names = {t.__name__ for t in type(exc).__mro__}
    return bool(names & {"DownloadBlocked", "OfflineModeIsEnabled", "LocalEntryNotFoundError"}) or (
        "offline" in str(exc).lower() and "hf_hub" in str(exc).lower()
    )


@dataclass
class Attempt:
    """What harvesting one class found: a case (entry, inputs) or the furthest reason it failed."""

    status: str = "not buildable"  # "runnable", "trivial" or "not buildable"
    reason: str = ""
    detail: str = ""
    entry: str = ""
    inputs: list[str] = field(default_factory=list)
    how: str = ""
    params: int = 0
    seconds: float = 0.0
    tries: int = 0

    def failed(self, reason: str, detail: str) -> None:
        """Keep the furthest reason reached (a forward failure says more than a build failure)."""
        if not self.reason or REASONS.index(reason) >= REASONS.index(self.reason):
            self.reason, self.detail = reason, detail


def _forward(model: nn.Module, specs: list[str], limit: float) -> tuple[Any, float]:
    inputs = make_inputs(specs)
    start = time.perf_counter()
    with time_limit(limit), torch.no_grad():
        output = model(*inputs)
    return output, time.perf_counter() - start


def _first_reached(model: nn.Module, specs: list[str], limit: float) -> tuple[Any, float, list[nn.Module]]:
    """Run the forward, noting the first layer an input rule knows that the forward reached
    (forward pre-hooks); the list holds it even when the forward fails later."""
    reached: list[nn.Module] = []

    def note(module: nn.Module, args: Any) -> None:
        if not reached:
            reached.append(module)

    handles = [m.register_forward_pre_hook(note) for m in model.modules() if is_rule_layer(m)]
    try:
        output, seconds = _forward(model, specs, limit)
    except BaseException as exc:
        exc.reached = reached  # type: ignore[attr-defined]
        raise
    finally:
        for handle in handles:
            handle.remove()
    return output, seconds, reached


def _try_inputs(model: nn.Module, attempt: Attempt, built_s: float, deadline: float) -> list[str] | None:
    """The first input list whose forward returns a tensor fast enough; None (reason noted) if
    none. The candidates come from the first layer in registration order; when a forward fails
    having reached another layer first, that layer's candidates are tried next (the order the
    forward uses beats the order the constructor registered)."""
    queue = input_candidates(model)
    layers = {id(first_layer(model))}
    index = 0
    while index < len(queue) and index < 2 * MAX_INPUT_CANDIDATES:
        specs, index = queue[index], index + 1
        left = deadline - time.perf_counter()
        if left <= 0:
            attempt.failed("too slow", "the class's time budget ran out while trying inputs")
            return None
        attempt.tries += 1
        try:
            output, forward_s, _ = _first_reached(model, specs, min(FORWARD_LIMIT_S, left))
        except Timeout:
            attempt.failed("too slow", f"forward on {specs} over {FORWARD_LIMIT_S} s")
            return None
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            if _is_download(exc):
                attempt.failed("downloads", _short(exc))
                return None
            if attempt.reason != "forward failed":  # the first candidate's failure says the most
                attempt.failed("forward failed", f"{specs}: {_short(exc)}")
            reached = getattr(exc, "reached", [])
            if reached and id(reached[0]) not in layers:
                layers.add(id(reached[0]))
                queue[index:index] = [c for c in input_candidates(model, reached[0]) if c not in queue]
            continue
        if not any(True for _ in tensors_in(output)):
            attempt.failed("no tensor output", f"{specs}: forward returned {type(output).__name__}")
            continue
        if all(t.numel() == 0 for t in tensors_in(output)):
            # an input from a layer the forward does not use (`x[..., 1:2]` of a 1-wide input):
            # nothing to compare, so another candidate is tried
            attempt.failed("no tensor output", f"{specs}: forward returned only empty tensors")
            continue
        if built_s + forward_s >= RUNNABLE_S:
            attempt.failed("too slow", f"build {built_s:.2f} s + forward {forward_s:.2f} s")
            return None
        attempt.seconds = built_s + forward_s
        return specs
    return None


def harvest_class(cls: type, namespace: dict[str, Any], qualname: str) -> Attempt:
    """Build `cls` by rule and find an input for it (see the module docstring)."""
    attempt = Attempt()
    if inspect.isabstract(cls):
        attempt.failed("abstract", "the class has abstract methods")
        return attempt
    try:
        reachable = eval(qualname, namespace) is cls  # a dotted name in the package's module
    except Exception:
        reachable = False
    if not reachable:
        attempt.failed("not reachable by name", f"{qualname} in its module's namespace is another object")
        return attempt
    candidates = constructor_candidates(cls)
    if not candidates:
        attempt.failed("args not guessable", "no rule for: " + ", ".join(unguessable_params(cls)))
        return attempt
    deadline = time.perf_counter() + CLASS_BUDGET_S
    for assignment in candidates:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        entry = assignment.expression(qualname)
        if assignment.needs_nn and namespace.get("nn") is not nn:  # a value is written `nn.Linear(...)`, `nn.ReLU`
            attempt.failed("args not guessable", f"{entry}: its module does not bind `nn` to torch.nn")
            continue
        torch.manual_seed(0)
        attempt.tries += 1
        start = time.perf_counter()
        try:
            with time_limit(min(BUILD_LIMIT_S, left)):
                model = eval(entry, namespace)  # literals only (rules.Assignment.expression)
        except Timeout:
            attempt.failed("too slow", f"{entry}: build over {BUILD_LIMIT_S} s")
            continue
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            if _is_download(exc):
                attempt.failed("downloads", f"{entry}: {_short(exc)}")
                return attempt
            reason = "args not guessable" if assignment.blind and isinstance(exc, TypeError) else "build failed"
            attempt.failed(reason, f"{entry}: {_short(exc)}")
            continue
        built_s = time.perf_counter() - start
        if not isinstance(model, nn.Module):
            attempt.failed("build failed", f"{entry} is a {type(model).__name__}")
            continue
        try:
            model.eval()
        except Exception as exc:  # a Module whose constructor skipped Module.__init__
            attempt.failed("build failed", f"{entry}: {_short(exc)}")
            continue
        specs = _try_inputs(model, attempt, built_s, deadline)
        trivial = is_trivial(model)  # trivial whether or not an input was found: not counted in rates
        if specs is not None or trivial:
            attempt.status = "trivial" if trivial else "runnable"
            if specs is not None:
                attempt.reason = attempt.detail = ""
            attempt.entry, attempt.inputs, attempt.how = entry, specs or [], assignment.how
            attempt.params = sum(p.numel() for p in model.parameters())
            return attempt
    if not attempt.reason:
        attempt.failed("too slow", "the class's time budget ran out")
    return attempt
