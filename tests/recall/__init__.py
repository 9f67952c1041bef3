"""Tests of memoryd/recall/."""
