"""Each section's tabs on the page: its layout, its events and its endpoints (Gradio only)."""
