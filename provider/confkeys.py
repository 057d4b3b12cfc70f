"""The prefix of every ttlstate conf key, defined once for the Python side (the JVM's is
`PythonService.CONF_PREFIX`). Spark forwards every `spark.sql.streaming.stateStore.*` conf to
each provider instance (`StateStoreConf.sqlConfs`), so keys under it reach every store."""

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
