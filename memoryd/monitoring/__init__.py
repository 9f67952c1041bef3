"""What operators look at: batches, dead letters, the health panel, metric figures.

May import: errors, ingest, memories, models, recall, settings.
"""

# prometheus-client's multiprocess mode: set before it is imported (memoryd serve
# --workers sets it), read by the server's /metrics. Here, where importing costs nothing.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
