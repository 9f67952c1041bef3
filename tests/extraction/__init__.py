"""Tests of memoryd/extraction/."""
