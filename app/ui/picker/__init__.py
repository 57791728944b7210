"""The model picker: choosing a main and a draft from the library, with compatibility, precision
and fit shown before loading. It builds on the library (its empty state and downloads) and on the
machines dialog (a main split across Macs)."""
