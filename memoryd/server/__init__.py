"""`memoryd serve`: the HTTP API, Prometheus metrics and the memory page (extra `server`)."""
