"""Hudi copy-on-write table (version 6) library: layout, timeline, views, commits."""
