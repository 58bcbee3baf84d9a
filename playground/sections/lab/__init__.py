"""The precision lab: magnitudes against the dtype ranges, the loss-scale sweep, the inspector."""
