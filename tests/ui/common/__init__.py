"""Tests of app/ui/common."""
