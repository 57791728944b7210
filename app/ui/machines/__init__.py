"""The machines dialog: which Macs the main model is split across, and whether they are reachable."""
