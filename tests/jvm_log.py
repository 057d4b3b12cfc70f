"""What the driver JVM logs, captured for a test: a log4j2 appender on a logger, added and removed through py4j."""

from __future__ import annotations

import contextlib
import uuid


class Captured:
    def __init__(self, writer):
        self._writer = writer

    @property
    def text(self) -> str:
        return str(self._writer.toString())


@contextlib.contextmanager
def captured(spark, logger: str = "io.ttlstate", level: str = "INFO"):
    """Every event of `logger` (and its children) at `level` or above while the block runs."""
    jvm = spark._jvm
    log4j = jvm.org.apache.logging.log4j
    ctx = log4j.LogManager.getContext(False)
    config = ctx.getConfiguration()
    writer = jvm.java.io.StringWriter()
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern("%p %c{1}: %m%n").build()
    name = f"ttlstate-test-{uuid.uuid4().hex[:8]}"
    appender = log4j.core.appender.WriterAppender.createAppender(layout, None, writer, name, False, True)
    appender.start()
    config.addAppender(appender)
    own = config.getLoggerConfig(logger).getName() != logger
    if own:  # no config of its own yet: one that passes everything on to its parents' as well
        logger_config = log4j.core.config.LoggerConfig(logger, log4j.Level.getLevel(level), True)
        config.addLogger(logger, logger_config)
    else:
        logger_config = config.getLoggerConfig(logger)
    old_level = logger_config.getLevel()
    logger_config.setLevel(log4j.Level.getLevel(level))
    logger_config.addAppender(appender, log4j.Level.getLevel(level), None)
    ctx.updateLoggers()
    try:
        yield Captured(writer)
    finally:
        logger_config.removeAppender(name)
        if own:
            config.removeLogger(logger)
        else:
            logger_config.setLevel(old_level)
        ctx.updateLoggers()
        appender.stop()
