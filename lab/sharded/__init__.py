"""The main split over several GPUs or processes: its decode loop, its models and their benchmarks."""
