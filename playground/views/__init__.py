"""Helpers that turn numbers into page elements, shared by every section."""
