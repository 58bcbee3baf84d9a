import pathlib
import sys

# The tests import the package from the checkout, without an install step.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

# The launched-app fixtures (app_url, client), shared by the API and browser tests.
pytest_plugins = ["fixtures_app"]
