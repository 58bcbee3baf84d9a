"""Training dynamics: float32, mixed and pure low-precision runs over many steps."""
