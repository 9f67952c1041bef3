"""Tests of memoryd/models/."""
