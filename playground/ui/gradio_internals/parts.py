"""Helpers Gradio keeps outside its documented API, used here as Gradio itself uses them.

PlotData               gr.Plot's payload (a figure as Plotly JSON), for a figure the app
                       has as a JSON dict already;
get_upload_folder      the folder Gradio's upload route writes to;
is_in_or_equal         Gradio's own test that a path is a folder or lies inside it;
is_file_obj_with_meta  whether a value is a file payload (a FileData dict with Gradio's
                       meta mark: what Gradio would move into its cache).
"""

from gradio.components.plot import PlotData
from gradio.utils import get_upload_folder, is_in_or_equal
from gradio_client.utils import is_file_obj_with_meta

__all__ = ["PlotData", "get_upload_folder", "is_file_obj_with_meta", "is_in_or_equal"]
