"""The debug logger's level type (RMM's ``rmm.librmm._logger``)."""

from rmm.pylibrmm.logger import level_enum

__all__ = ["level_enum"]
