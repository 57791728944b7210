"""Tests of app/ui/library."""
