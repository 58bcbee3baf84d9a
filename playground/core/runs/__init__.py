"""Runs of many steps: the loss-scale sweep (``sweep``) and the training dynamics (``train``)."""
