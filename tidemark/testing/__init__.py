"""Test infrastructure shipped with the package because benchmarks use it too: a local S3
server with a fault proxy, and the failure injection points of the Spark jobs."""
