"""Tests of app/ui/chat."""
