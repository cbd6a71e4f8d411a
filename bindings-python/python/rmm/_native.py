"""Names taken from the compiled module ``rmm._rmm`` (private).

The public modules (``rmm.mr``, ``rmm.pylibrmm.*``, ...) arrange the native names into RMM's module
paths. They ask for them through :func:`names`, so that a build of ``rmm._rmm`` that lacks a name
still imports: the missing name becomes a stand-in that raises ``NotImplementedError`` naming it
when it is used (a class that cannot be instantiated, or a function or constant that cannot be
called), and :data:`MISSING` lists it. A complete build has ``MISSING == []``; the test suite
reports the list.
"""

from __future__ import annotations

from typing import Any

from rmm import _rmm

#: Names that public modules asked for and this build of ``rmm._rmm`` does not export.
MISSING: list[str] = []


def _unavailable(name: str) -> NotImplementedError:
    return NotImplementedError(f"rmm._rmm.{name} is not provided by this build of rmm-rs's native module")


class _MissingValue:
    """Stands in for a missing native function or constant: any call raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _unavailable(self._name)

    def __repr__(self) -> str:
        return f"<missing rmm._rmm.{self._name}>"


def _missing_class(name: str) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise _unavailable(name)

    return type(name, (), {"__init__": __init__, "__module__": "rmm._native", "__doc__": f"Missing: rmm._rmm.{name}."})


def names(*wanted: str) -> tuple[Any, ...]:
    """The native objects called ``wanted``, in order; a stand-in for each one that is missing
    (CamelCase names become classes, others callables)."""
    found = []
    for name in wanted:
        value = getattr(_rmm, name, None)
        if value is None:
            if name not in MISSING:
                MISSING.append(name)
            value = _missing_class(name) if name[:1].isupper() and not name.isupper() else _MissingValue(name)
        found.append(value)
    return tuple(found)
