"""The Gradio page: the only Gradio code of the package.

Import what you need from its modules (``playground.ui.page.build_demo``,
``playground.ui.launch``): this package re-exports nothing, so importing one of its leaves (the
widgets, the URL state) never builds the page.
"""
