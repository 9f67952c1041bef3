"""Tests of memoryd/cli/."""
