"""The step section: losses, reading and gradient charts."""
