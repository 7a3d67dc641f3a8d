"""The search pipeline: keyword and vector retrieval, fusion, decay, diversity, truncation."""
