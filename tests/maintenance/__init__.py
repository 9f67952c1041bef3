"""Tests of memoryd/maintenance/."""
