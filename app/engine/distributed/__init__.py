"""Running the main model across several machines with MLX's distributed ring backend.

The machines are listed in mlx.launch's hostfile (`hosts`); a connection test asks each one
what it runs (`probe`); `memory_split` says whether each machine's share of the model fits.
"""
