"""Tests of memoryd/ingest/."""
