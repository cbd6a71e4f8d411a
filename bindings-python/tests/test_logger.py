"""rmm.pylibrmm.logger (re-exported from rmm): levels, flush level, argument checking."""

import warnings

import pytest

import rmm
import rmm.librmm._logger
from rmm.pylibrmm.logger import level_enum

NAMES = ["trace", "debug", "info", "warn", "error", "critical", "off", "n_levels"]


@pytest.fixture(autouse=True)
def restore_levels():
    level, flush = rmm.get_logging_level(), rmm.get_flush_level()
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rmm.set_logging_level(level)
        rmm.set_flush_level(flush)


def test_levels_are_rmms():
    assert [member.name for member in level_enum] == NAMES
    assert [int(member) for member in level_enum] == list(range(8))
    assert rmm.level_enum is level_enum
    assert rmm.librmm._logger.level_enum is level_enum


@pytest.mark.parametrize("name", NAMES[:-1])
def test_set_and_get(name):
    level = level_enum[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rmm.set_logging_level(level)
        rmm.set_flush_level(level)
    assert rmm.get_logging_level() == level
    assert rmm.get_flush_level() == level
    assert isinstance(rmm.get_logging_level(), level_enum)


def test_should_log_follows_the_level():
    rmm.set_logging_level(level_enum.warn)
    assert rmm.should_log(level_enum.error)
    assert rmm.should_log(level_enum.warn)
    assert not rmm.should_log(level_enum.info)
    rmm.set_logging_level(level_enum.off)
    assert not rmm.should_log(level_enum.critical)


@pytest.mark.parametrize("bad", ["INFO", 3, "invalid", 100, None, 1.2345, [1, 2, 3]])
def test_anything_but_a_level_is_a_type_error(bad):
    for func in (rmm.set_logging_level, rmm.set_flush_level, rmm.should_log):
        with pytest.raises(TypeError):
            func(bad)


def test_flush_logger_can_always_be_called():
    rmm.flush_logger()


def test_setting_a_level_that_will_not_be_logged_warns_as_rmm():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rmm.set_logging_level(level_enum.info)  # a set level is always logged: no warning
        rmm.set_flush_level(level_enum.error)
    # RMM warns after either setting when should_log(level) is false: a flush level below the
    # logging level is never reached.
    with pytest.warns(UserWarning, match=r"RMM will not log level_enum\.debug\. This may be because"):
        rmm.set_flush_level(level_enum.debug)
    assert rmm.get_flush_level() == level_enum.debug
