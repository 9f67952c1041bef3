"""Tests of memoryd/memories/."""
