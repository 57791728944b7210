"""Tests of app/ui/window."""
