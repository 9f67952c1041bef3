"""What operators look at: batches, dead letters, the health panel, metric figures."""

# prometheus-client's multiprocess mode: set before it is imported (memoryd serve
# --workers sets it), read by the server's /metrics. Here, where importing costs nothing.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
