"""Your tensors: a visitor's safetensors file against every format and block recipe."""
