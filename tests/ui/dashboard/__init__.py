"""Tests of app/ui/dashboard."""
