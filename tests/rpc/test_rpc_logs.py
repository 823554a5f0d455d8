"""Logging: JSON lines with bound context, stdlib routed, idempotent setup."""

from __future__ import annotations

import json
import logging

import pytest
import structlog

from tidemark.errors import ConfigError
from tidemark.logs import configure_logging, use_library_defaults


def test_json_lines_carry_bound_context_for_structlog_and_stdlib(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(json=True)
    configure_logging(json=True)
    structlog.contextvars.bind_contextvars(request_id="r1", table="/t", instant="20240101000000000")
    structlog.get_logger("tidemark.test").info("hello", files=3)
    logging.getLogger("some.library").warning("from stdlib")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [line["event"] for line in lines] == ["hello", "from stdlib"]
    for line in lines:
        assert line["request_id"] == "r1"
        assert line["table"] == "/t"
        assert line["instant"] == "20240101000000000"
    assert lines[0]["files"] == 3
    assert lines[1]["level"] == "warning"


def test_level_filters_and_console_renderer(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(json=False, level="warning")
    structlog.get_logger("tidemark.test").info("quiet")
    structlog.get_logger("tidemark.test").warning("loud", table="/t")
    err = capsys.readouterr().err
    assert "quiet" not in err
    assert "loud" in err
    assert "table=/t" in err
    assert not err.lstrip().startswith("{")


def test_unknown_level_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as raised:
        configure_logging(json=True, level="chatty")
    assert raised.value.field == "log_level"


def test_library_defaults_keep_stdout_clean_and_log_from_warning_on_stderr(
    restore_logging: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIDEMARK_LOG_LEVEL", raising=False)
    logging.getLogger().handlers.clear()  # a user's process: pytest's own handlers gone
    structlog.reset_defaults()
    use_library_defaults()
    structlog.get_logger("tidemark.test").debug("hidden debug")
    structlog.get_logger("tidemark.test").info("hidden info")
    structlog.get_logger("tidemark.test").warning("shown", table="/t")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "hidden" not in captured.err
    assert "shown" in captured.err and "table=/t" in captured.err


def test_library_level_from_the_env_and_an_unknown_one_said_once(
    restore_logging: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDEMARK_LOG_LEVEL", "info")
    logging.getLogger().handlers.clear()
    structlog.reset_defaults()
    use_library_defaults()
    structlog.get_logger("tidemark.test").info("now shown")
    assert "now shown" in capsys.readouterr().err
    monkeypatch.setenv("TIDEMARK_LOG_LEVEL", "chatty")
    structlog.reset_defaults()
    use_library_defaults()
    structlog.get_logger("tidemark.test").info("hidden again")
    err = capsys.readouterr().err
    assert "hidden again" not in err
    assert "logs.unknown_level" in err and "value=chatty" in err
