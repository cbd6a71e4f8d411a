"""RMM's debug logger (RMM's ``rmm.pylibrmm.logger``): its level, flush level and flushing.

Every function that takes a level raises ``TypeError`` for anything but a :class:`level_enum`
member; setting a level the library was built not to log gives a ``UserWarning``.
"""

from rmm._rmm import (
    level_enum,
    should_log,
    set_logging_level,
    get_logging_level,
    flush_logger,
    set_flush_level,
    get_flush_level,
)

__all__ = [
    "flush_logger",
    "get_flush_level",
    "get_logging_level",
    "level_enum",
    "set_flush_level",
    "set_logging_level",
    "should_log",
]
