"""Every use of Gradio past its documented API, in one package, pinned to GRADIO_VERSIONS.

Rule: a module outside this package uses Gradio through its public API only (``gr.*``, an
event's ``api_name``, ``concurrency_id``, ``concurrency_limit``, ``trigger_mode``, ``validator``,
a ``request: gr.Request`` parameter, ``gr.skip()``, ``gr.validate``, ``gr.FileData``). What the
public Space needs beyond it is read here, by name:

  queue    what Gradio's queue holds (``queue``): the events waiting in each concurrency group
           and running, each event's request headers (its client), inputs and session, a queued
           event's removal, an ended event
           put on a session's stream, the records of finished sessions;
  events   the page's events as Gradio registered them (``events``): found by API name or
           index, their kind, their handler's parameters, a validator's event;
  blocks   the two overrides of ``gr.Blocks``' event path (``blocks.EventBlocks``), each where
           Gradio has no hook.

tests/ui/test_gradio_internals.py is the canary: it checks that Gradio is one of GRADIO_VERSIONS and
that every name used here still exists with the signature relied on, so an upgrade fails
there, in one place, and that no module outside this package reaches past the public API.
"""

# The releases the app-level tests pass on (docs/testing.md says how both are run); the
# internals read here are the same in both.
GRADIO_VERSIONS = ("6.30.0", "6.31.0")
