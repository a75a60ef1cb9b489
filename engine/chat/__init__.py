"""Chat and instruction data: records (``records``), chat templates (``template``), ids and role flags (``encode``)."""
