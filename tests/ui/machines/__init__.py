"""Tests of app/ui/machines."""
