"""Tests of app/ui/picker."""
