"""The developers' lab: GPU and sharded benchmarks, replay over recorded answers and probes,
run from a checkout (`python -m lab.gpu.gpu_bench`, `python -m lab.replay`). It imports the app;
the app never imports it (an import-linter contract), and the wheel and the bundle leave it out."""
