"""Tests of app/ui/server."""
