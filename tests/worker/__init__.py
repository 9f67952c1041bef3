"""Tests of memoryd/worker/."""
