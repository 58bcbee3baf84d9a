"""Concepts every page section uses: dtypes, data, models, optimizers, loss scaling, the step."""
