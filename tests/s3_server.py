"""An S3-protocol server for the tests (pytest -m s3): moto's standalone server, a process of its
own on a loopback port, speaking S3 over HTTP (no TLS), with a bucket for the test; and the
Spark confs that point S3A (hadoop-aws, resolved by `make servers`) at it.

moto rather than s3proxy: a pip-installed Python server that starts in about a second, holds its
objects in memory (nothing to clean up on disk) and implements the S3 calls S3A makes (multipart
uploads, conditional and ranged GETs, ListObjectsV2, bulk deletes)."""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import sys
import time
import urllib.request

from server_process import SERVERS, classpath, die_with_parent, free_port, stop_process

S3A_CLASSPATH = SERVERS / "s3a.classpath"
ACCESS_KEY, SECRET_KEY, REGION = "ttlstate-test", "ttlstate-test-secret", "us-east-1"


def s3a_jars() -> list[str]:
    """hadoop-aws and the AWS SDK bundle (the Hadoop client itself is pyspark's)."""
    return classpath(S3A_CLASSPATH)


class S3Server:
    def __init__(self, work: pathlib.Path):
        self.work = work
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = None  # the server's output, while it runs

    def start(self, timeout_s: float = 60) -> "S3Server":
        self.work.mkdir(parents=True, exist_ok=True)
        self.log = open(self.work / "s3.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the S3 server exited ({self.proc.returncode}): "
                                   f"{(self.work / 's3.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.endpoint + "/", timeout=2).read()
                return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"the S3 server did not answer in {timeout_s:.0f} s")

    def client(self):
        import boto3
        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def spark_confs(self, endpoint: str | None = None) -> dict[str, str]:
        """S3A against this server (or `endpoint`, a proxy in front of it), as a user's cluster
        would set it (path-style, plain HTTP)."""
        h = "spark.hadoop.fs.s3a."
        return {h + "endpoint": endpoint or self.endpoint, h + "endpoint.region": REGION,
                h + "path.style.access": "true", h + "connection.ssl.enabled": "false",
                h + "access.key": ACCESS_KEY, h + "secret.key": SECRET_KEY,
                h + "aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"}

    def stop(self) -> None:
        stop_process(self.proc, 20)
        self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None


@contextlib.contextmanager
def running_s3(work: pathlib.Path, bucket: str):
    """An S3 server with `bucket`, and a counting proxy in front of it (tests/s3_proxy.py):
    yields (server, proxy); both stop afterwards."""
    from s3_proxy import CountingProxy
    server = S3Server(work).start()
    proxy = CountingProxy(server.port).start()
    try:
        server.client().create_bucket(Bucket=bucket)
        yield server, proxy
    finally:
        proxy.stop()
        server.stop()
