"""`memoryd serve`: the HTTP API, Prometheus metrics and the memory page (extra `server`).

May import: agents, async_client, client, errors, extraction, ingest, memories, models,
monitoring, recall, settings.
"""
