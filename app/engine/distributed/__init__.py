"""One main model split across several processes or Macs with MLX's own distributed stack.

The main is sharded by mlx-lm's tensor parallelism (`model.shard(group)`); rank 0 runs the
ordinary decode loop and tells the other ranks which main passes to run (`collective.py`), so
every rank's cache stays in step. The caller's process talks to rank 0 over the launcher's pipes
(`wire.py`, `session.py`), which lets it end a hung collective by killing the launcher.

Before that, the machines are listed in mlx.launch's hostfile (`hosts`); a connection test asks
each one what it runs (`probe`); `memory_split` says whether each machine's share of the model fits.
"""
