"""Tests of app/ui/arena."""
