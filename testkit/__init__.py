"""The real parts the test suite and the benches run memoryd against: a scripted model
speaking the OpenAI protocol over HTTP (fakellm), a reranking server (rerank_server),
PostgreSQL, Redis and PgBouncer found or started (services), worker and beat processes
(workers) and what they run on (hosts). Not shipped with memoryd."""
