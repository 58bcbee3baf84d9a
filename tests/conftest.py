import pathlib
import sys

# The tests import the package from the checkout, without an install step.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
