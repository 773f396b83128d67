"""The frozen-garbage characterization (Desiccant §3.1): protocol, analysis, rendering."""
