"""NVTX ranges without editing the workload: ``annotate`` and ``--nvtx-module`` wrappers.

* :func:`annotate` is a decorator and a context manager. It emits an NVTX push/pop range
  through the ``nvtx`` package when that is installed (Nsight Systems records it), and
  tells every registered range hook (:func:`add_range_hook`; the CUPTI and PyTorch
  backends register one so their traces get the same regions). Without ``nvtx`` it warns
  once and does nothing else.
* :func:`wrap_function` patches ``module:qualname`` (e.g. ``mypkg.train:step`` or
  ``mypkg.model:Net.forward``) so every call runs inside ``annotate(name)``; the launcher
  ``python -m hilsim.agent.launch --nvtx mypkg.train:step -- script.py ARGS`` installs the
  wrappers and then runs the script with :mod:`runpy`. Code that already holds a
  reference to the original function (``from mypkg.train import step`` executed before
  the patch) keeps the unwrapped one; the launcher patches before the script runs.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

_warned = False
_lock = threading.Lock()


class RangeHook(Protocol):
    """Receives every range :func:`annotate` opens and closes (same thread, nested).

    A hook whose ``replaces_nvtx`` attribute is true records the ranges itself and asks
    :func:`annotate` not to emit them through the ``nvtx`` package as well (the CUPTI
    backend: see :class:`hilsim.agent.cupti_launch.CuptiRecorder`).
    """

    def push(self, name: str) -> None: ...

    def pop(self) -> None: ...


_hooks: list[RangeHook] = []


def add_range_hook(hook: RangeHook) -> None:
    """Register ``hook`` for every later :func:`annotate` range."""
    with _lock:
        _hooks.append(hook)


def remove_range_hook(hook: RangeHook) -> None:
    with _lock:
        if hook in _hooks:
            _hooks.remove(hook)


def _nvtx_module() -> Any | None:
    global _warned
    try:
        import nvtx  # lazy: GPU extra
    except ImportError:
        if not _warned:
            _warned = True
            warnings.warn(
                "hilsim: the 'nvtx' package is not installed; NVTX ranges from "
                "agent.annotate / --nvtx-module are not emitted (pip install nvtx)",
                RuntimeWarning,
                stacklevel=3,
            )
        return None
    return nvtx


@contextmanager
def _range(name: str, color: str | None, domain: str | None) -> Iterator[None]:
    hooks = list(_hooks)
    replaced = any(getattr(hook, "replaces_nvtx", False) for hook in hooks)
    nvtx = None if replaced else _nvtx_module()
    with ExitStack() as stack:
        if nvtx is not None:
            kwargs: dict[str, Any] = {"message": name}
            if color is not None:
                kwargs["color"] = color
            if domain is not None:
                kwargs["domain"] = domain
            stack.enter_context(nvtx.annotate(**kwargs))
        for hook in hooks:
            hook.push(name)
            stack.callback(hook.pop)
        yield


class annotate:  # noqa: N801 - used like nvtx.annotate
    """NVTX range as a decorator (``@annotate("step")``, ``@annotate``) or ``with`` block.

    Args:
        message: range name; for a decorator the function's qualified name by default.
        color: NVTX colour (passed to ``nvtx.annotate``).
        domain: NVTX domain (passed to ``nvtx.annotate``).
    """

    def __init__(
        self,
        message: str | Callable[..., Any] | None = None,
        color: str | None = None,
        domain: str | None = None,
    ) -> None:
        self._func: Callable[..., Any] | None = None
        if callable(message):
            self._func, message = message, None
        self.message = message
        self.color = color
        self.domain = domain
        self._stack: list[ExitStack] = []
        if self._func is not None:
            functools.update_wrapper(self, self._func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._func is not None:  # bare @annotate
            with _range(self.message or self._func.__qualname__, self.color, self.domain):
                return self._func(*args, **kwargs)
        func = args[0]
        name = self.message or getattr(func, "__qualname__", str(func))

        @functools.wraps(func)
        def wrapper(*a: Any, **k: Any) -> Any:
            with _range(name, self.color, self.domain):
                return func(*a, **k)

        return wrapper

    def __enter__(self) -> annotate:
        stack = ExitStack()
        stack.enter_context(_range(self.message or "range", self.color, self.domain))
        self._stack.append(stack)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.pop().close()


def parse_function_spec(spec: str) -> tuple[str, str]:
    """``"pkg.mod:Class.method"`` -> ``("pkg.mod", "Class.method")``; ValueError if malformed."""
    module, sep, qualname = spec.partition(":")
    if not sep or not module.strip() or not qualname.strip():
        raise ValueError(
            f"--nvtx-module {spec!r}: expected MODULE:FUNCTION (e.g. mypkg.train:step)"
        )
    return module.strip(), qualname.strip()


def wrap_function(spec: str, name: str | None = None) -> Callable[..., Any]:
    """Replace ``module:qualname`` by a wrapper that runs it inside ``annotate(name)``.

    ``name`` defaults to the qualified name. Returns the wrapper. Raises ValueError with
    one line when the module cannot be imported or has no such attribute.
    """
    module_name, qualname = parse_function_spec(spec)
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--nvtx-module {spec!r}: cannot import {module_name!r} ({exc})") from exc
    parts = qualname.split(".")
    for part in parts[:-1]:
        try:
            owner = getattr(owner, part)
        except AttributeError as exc:
            raise ValueError(f"--nvtx-module {spec!r}: {part!r} not found") from exc
    attribute = parts[-1]
    raw = owner.__dict__.get(attribute) if hasattr(owner, "__dict__") else None
    if raw is None:
        if not hasattr(owner, attribute):
            raise ValueError(f"--nvtx-module {spec!r}: {attribute!r} not found in {module_name}")
        raw = getattr(owner, attribute)
    label = name or qualname
    if isinstance(raw, staticmethod | classmethod):
        inner = raw.__func__
        wrapped = type(raw)(annotate(label)(inner))
        setattr(owner, attribute, wrapped)
        return wrapped
    if not callable(raw):
        raise ValueError(f"--nvtx-module {spec!r}: {qualname} is not callable")
    wrapped = annotate(label)(raw)
    setattr(owner, attribute, wrapped)
    return wrapped


def install(specs: list[str]) -> None:
    """Wrap every spec (see :func:`wrap_function`); the working directory is importable."""
    if "" not in sys.path:
        sys.path.insert(0, "")
    for spec in specs:
        wrap_function(spec)


__all__ = ["add_range_hook", "annotate", "install", "parse_function_spec", "remove_range_hook",
           "wrap_function"]
